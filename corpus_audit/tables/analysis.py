"""The analysis tables as the stages that write them and the report that reads them share them.

Their names (:data:`ANALYSIS_TABLES`: what ``analyze`` rewrites in one transaction;
:data:`VARIANT_TABLES`: what ``variants`` writes per comparison field), the fingerprint of
everything the analysis reads (:func:`input_fingerprint`: the report says the analysis is stale
when it differs from the one the last ``analyze`` run recorded), and the classifiers whose
weights are untrained (:func:`untrained_classifiers`: a warning on every page that shows them).
"""

from __future__ import annotations

import hashlib
import json

from corpus_audit.backends.classifiers import is_untrained
from corpus_audit.core.catalogue import ATTRIBUTE_RESULTS, CORRECTION_RESULTS
from corpus_audit.core.store import Study
from corpus_audit.methods.lexicon.labour_map import map_digest

# every table analyze writes (the catalogue's declaration), in the order the analysis's input
# fingerprint has always listed them
ANALYSIS_TABLES = (
    "training_subsets",
    "percent_female",
    "amplification",
    "amplification_summary",
    "indicator_match",
    "occupation_indicators",
    "indicator_correlation",
    "image_similarity",
    *CORRECTION_RESULTS,
    "generated_gender",
    *ATTRIBUTE_RESULTS,
)

# methods.recaption.compare.VariantComparison field -> study table (and CSV name)
VARIANT_TABLES = {
    "indicator_rates": "variant_rates",
    "mention_changes": "variant_mention_changes",
    "mention_flips": "variant_mention_flips",
    "image_changes": "variant_image_changes",
    "transitions": "variant_transitions",
    "transition_examples": "variant_transition_examples",
    "differences": "variant_differences",
    "similarity": "variant_similarity",
}

# Columns each input table contributes to the fingerprint.
_FINGERPRINT_COLUMNS = {
    "samples": "strategy, occupation, prompt_id, caption_id, rank",
    "prompts": "prompt_id, template_id, occupation",
    "images": "image_id, source, caption_id, prompt_id, occupation, model_id, strategy, path",
    "face_filter": "image_id, kept",
    "labels": "image_id, classifier, p_female, label",
    "mentions": "caption_id, occupation",
    "indicators": "caption_id, label",
    # the misclassification correction; the attribute correction, Monk calibration and race
    "human_labels": "image_id, annotator, label, monk, age_bin, race",
    "perceived_age": "image_id, model, expected_age, age_bin, minor",  # attribute tables
    "skin_tone": "image_id, method, status, l_star, hue_deg",
}


def input_fingerprint(study: Study) -> str:
    """Hash of everything the analysis reads (rows and config), order-independent."""
    # the cut reads select (N, unit), indicators (split) and neighbors (k); similarity reads label
    sections = ("analysis", "study", "select", "indicators", "neighbors", "label")
    parts: dict[str, object] = {"config": study.config.section_hash(*sections)}
    for table, cols in _FINGERPRINT_COLUMNS.items():
        parts[table] = study.fingerprint(table, cols)
    # generated_gender: the prompts' languages and the shipped labour statistics; the output
    # tables themselves, so a study made before one of them existed fills it on the next run
    parts["prompt_categories"] = study.fingerprint("prompt_categories", "prompt_id, language")
    parts["labour_statistics"] = map_digest()
    parts["outputs"] = list(ANALYSIS_TABLES)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def untrained_classifiers(study: Study) -> list[str]:
    """Classifier ids in ``labels`` (and CLIP models of the image similarity) that name
    untrained (random) weights."""
    ids = study.sql("analyze/model_ids").fetchall()
    return [i for (i,) in ids if is_untrained(i)]


def correction_messages(prov: dict) -> list[str]:
    """The lines about the misclassification correction of the ``analyze`` run whose
    provenance section ``correction`` is ``prov`` (the run's messages, the report's banner)."""
    sources = prov["sources"]
    if not sources or all(v == "no correction (no validation labels)" for v in sources.values()):
        return ["misclassification correction: no correction (no validation labels)"]
    out = [
        "misclassification correction ("
        + prov["scope"].replace("_", " ")
        + "): "
        + ", ".join(f"{s} {state}" for s, state in sorted(sources.items()))
    ]
    c = prov["changes"]
    if c["pairs_compared"] or c["cells_compared"]:
        out.append(
            f"corrected amplification: {c['pairs_sign_changed']} of {c['pairs_compared']} pairs "
            f"change sign; {c['cells_lost_significance']} of {c['cells_compared']} tested cells "
            f"lose significance (p < 0.05), {c['cells_gained_significance']} gain it"
        )
    return out
