"""The strata of the validation sample, shared by ``validate export`` and ``analyze``.

By default a stratum is (image source, the classifier's label): ``training/female``. With
``validate export --by-attributes`` it is also split by the perceived skin-tone group and age
group of the image (``training/female/l_dark/35_54``; ``none`` where not measured), so that
every such group of every source gets an equal quota of the sample, small groups included
(the equal allocation of :func:`corpus_audit.methods.stats.allocate`). The analysis weighs a
validated image ``N_s / n_s`` by the strata of the latest sample (``validation_items``):
:func:`prepare_strata` builds the groups (temp table ``validation_groups``,
``sql/validate/groups.sql``) and says which kind the sample used.
"""

from __future__ import annotations

from corpus_audit.core.store import Study, dicts
from corpus_audit.stages.analyze.attributes import instruments


def prepare_strata(study: Study) -> bool:
    """Build ``validation_groups`` and return whether the latest sample was drawn by
    attribute (its strata have four parts)."""
    age_model, skin_method = instruments(study)
    study.sql("validate/groups", age_model=age_model, skin_method=skin_method)
    if not study.table_exists("validation_items"):
        return False
    return bool(study.count("validation_items", "len(string_split(stratum, '/')) = 4"))


def strata_sizes(study: Study, classifier: str | None, by_attributes: bool) -> dict[tuple, int]:
    """The analysed labelled images per stratum ``(side, model_id, stratum_label)``: the
    population N_s each stratum of the sample was drawn from (needs ``analysis_labelled`` and
    :func:`prepare_strata`)."""
    rows = study.sql(
        "analyze/validation_strata", classifier=classifier or "", by_attributes=by_attributes
    )
    return {(r["side"], r["model_id"], r["stratum_label"]): r["n"] for r in dicts(rows)}
