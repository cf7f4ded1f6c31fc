"""The ``validate_export`` and ``validate_import`` stages: human validation of the
perceived-gender labels (METHODS 1.4, last paragraph).

``corpus-audit validate export DIR --n 200`` (:func:`export_sheet`) draws a stratified sample of
labelled images, strata = (image source, classifier label), equal shares per stratum (a small
stratum gives its unused share to the others), reproducible from ``study.seed``. It writes

- ``sheet.html``: one self-contained page (images inlined as base64 JPEG thumbnails, no
  external resources, every text escaped) where an annotator clicks male / female / unsure
  per image and downloads a filled CSV (the page builds it in the browser, offline);
- ``sheet.csv``: the same items as a CSV template (``item, image_id, label``) to fill by hand.

The classifier's labels are not shown (annotators label blind). The sample is stored in
``validation_items``.

``corpus-audit validate import DIR FILE...`` (:func:`import_labels`) reads one CSV per
annotator (columns ``image_id`` or ``item``, and ``label``: male / female / unsure, also
m / f / u; empty = not annotated; an ``annotator`` column, else the file name), replaces
earlier labels of the same annotators in ``human_labels`` and reports Krippendorff's alpha
(nominal; ``krippendorff`` package) among all annotators, with and without ``unsure``, and
the classifier's agreement with the per-image majority vote (the paper: alpha 0.948, 98 %).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.stages.validate.answers import (
    compare,
    further_alphas,
    majority,
    read_annotations,
    reliability,
    store,
    summary_dict,
)
from corpus_audit.stages.validate.sheet import (
    THUMBNAIL_PX,
    PrepareStrata,
    Thumbnail,
    classifier_for,
    draw_sample,
    write_sheet,
)

__all__ = [
    "THUMBNAIL_PX", "draw_sample", "export_sheet", "import_labels", "majority",
    "read_annotations", "reliability", "summary_dict",
]  # fmt: skip


def _check_n(arguments: dict[str, Any]) -> None:
    """``--n`` >= 1 (the runner asks before the run opens)."""
    if arguments["n"] < 1:
        raise CorpusAuditError(f"validate export: --n must be >= 1, got {arguments['n']}")


@stage_body("validate_export", arguments=_check_n)
def export_sheet(
    study: Study,
    run: StageRun,
    n: int = 200,
    out_dir: Path | None = None,
    race: bool = False,
    by_attributes: bool = False,
    *,
    thumbnail: Thumbnail,
    prepare_strata: PrepareStrata,
    progress: bool = False,
) -> StageRun:
    """Write the annotation sheet (HTML + CSV) for a stratified sample of ``n`` >= 1 images;
    ``race``: also ask perceived race or ethnicity (opt-in, human answers only);
    ``by_attributes``: equal quotas per (source, label, tone group, age group). The
    ``validate_export`` stage of the catalogue. ``thumbnail`` and ``prepare_strata``: the
    report's thumbnails and the analysis's strata (:mod:`.sheet`; a stage imports neither);
    ``progress`` is unused (the stage signature)."""
    cid = classifier_for(study)
    sample = draw_sample(study, cid, n, by_attributes, prepare_strata)
    out = Path(out_dir) if out_dir is not None else study.root / "validation"
    out.mkdir(parents=True, exist_ok=True)
    sheet, table, missing = write_sheet(study, sample, out, race, thumbnail)
    with study.transaction() as con:
        con.execute("DELETE FROM validation_items")
        if sample:
            con.executemany(
                "INSERT INTO validation_items VALUES (?, ?, ?, ?)",
                [(i, s[0], cid, s[2]) for i, s in enumerate(sample, start=1)],
            )
    counts = Counter(s[2] for s in sample)
    run.rows_in = study.count("labels", "classifier = ?", [cid])
    run.rows_out = len(sample)
    run.summary = [{"stratum": s, "images": c} for s, c in sorted(counts.items())]
    if len(sample) < n:
        run.messages.append(f"only {len(sample)} labelled images available (asked for {n})")
    if missing:
        run.messages.append(f"{missing} images could not be read; shown as unavailable")
    run.messages.append(
        f"send {sheet.name} to each annotator; import their CSVs with "
        "`corpus-audit validate import DIR FILE...`"
    )
    run.outputs = {"sheet": str(sheet), "csv": str(table)}
    run.provenance.update(
        {
            "classifier": cid,
            "n": n,
            "strata": dict(counts),
            "race": race,
            "by_attributes": by_attributes,
        }
    )
    return run


@stage_body("validate_import")
def import_labels(
    study: Study, run: StageRun, files: list[Path], *, progress: bool = False
) -> StageRun:
    """Import annotator CSVs into ``human_labels``; report alpha and classifier agreement.
    The ``validate_import`` stage of the catalogue; ``progress`` is unused (the signature)."""
    rows = read_annotations(study, [Path(f) for f in files])
    annotators = sorted({r[1] for r in rows})
    store(study, rows, annotators)
    run.rows_in = len(rows)
    run.rows_out = len(rows)
    votes: dict[str, dict[str, str]] = defaultdict(dict)
    for image_id, annotator, label in study.con.execute(
        "SELECT image_id, annotator, label FROM human_labels WHERE label <> ''"
    ).fetchall():
        votes[image_id][annotator] = label
    cid = classifier_for(study) if study.count("labels") else None
    classifier = (
        dict(
            study.con.execute(
                "SELECT image_id, label FROM labels WHERE classifier = ?", [cid]
            ).fetchall()
        )
        if cid
        else {}
    )
    all_annotators = sorted({a for v in votes.values() for a in v})
    alpha = reliability(votes)
    alpha_sure = reliability(votes, drop_unsure=True)
    compared, agree, clf_ambiguous, no_majority, majority_unsure = compare(votes, classifier)
    agreement = agree / compared if compared else None
    run.summary = [
        {"metric": "annotators", "value": len(all_annotators)},
        {"metric": "images annotated", "value": len(votes)},
        {"metric": "krippendorff_alpha (male/female/unsure)", "value": alpha},
        {"metric": "krippendorff_alpha (unsure as missing)", "value": alpha_sure},
        {"metric": f"agreement of {cid} with majority vote", "value": agreement},
        {"metric": "images compared (majority and classifier male/female)", "value": compared},
        {"metric": "classifier ambiguous", "value": clf_ambiguous},
        {"metric": "majority unsure", "value": majority_unsure},
        {"metric": "no majority (tie)", "value": no_majority},
    ]
    run.summary += further_alphas(study)
    if alpha is None:
        run.messages.append("Krippendorff's alpha needs at least two annotators on an image")
    run.messages.append("reference (paper): alpha 0.948, 98 % agreement with the majority")
    run.provenance.update(
        {
            "files": [str(f) for f in files],
            "annotators_imported": annotators,
            "classifier": cid,
            "alpha": alpha,
            "alpha_unsure_as_missing": alpha_sure,
            "agreement": agreement,
        }
    )
    return run
