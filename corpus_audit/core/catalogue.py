"""The stage catalogue: every stage's declaration, and the order ``corpus-audit run`` runs them.

A stage is a function ``fn(study: Study, *, progress: bool = True) -> StageRun`` in its own
module, plus one :class:`Stage` declaration here saying what it reads and writes. The
catalogue is plain data, kept apart so the CLI, ``status`` and the help can use it without
importing any stage module (those load torch, spaCy or MediaPipe).

What the declaration drives:

- ``config``: the sections (``"label"``) and single settings (``"images.max_pixels"``) whose
  hash :meth:`Study.stage` records; ``status`` flags the run when they change, and the stage's
  ``--help`` lists their keys (:mod:`corpus_audit.core.config_help`).
- ``reads``: the tables it reads that other stages write; :meth:`Study.stage` records their
  fingerprints (:func:`corpus_audit.core.store.table_fingerprint`) and ``status`` flags the run when
  one changed since ("inputs changed since this run: samples"), e.g. ``neighbors`` after
  ``select`` ran again.
- ``needs`` / ``after``: the stages that must have finished before it runs, and those whose
  tables it reads when they ran; :func:`corpus_audit.core.stage_state.require_inputs` checks both
  (neither may be partial).
- ``writes``: the tables it writes; where several stages write one table, ``owns`` says which
  rows are this stage's (a description a reader can match to the SQL).
- ``options``: flags of the stage's verb that set a key of its config section, written to
  ``study.toml`` (validated) before the run (``recaption --model``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from corpus_audit.core.registry import Registry


@dataclass(frozen=True)
class Stage:
    """One stage's declaration (see the module docstring)."""

    name: str
    target: str  # "package.module:function"
    summary: str  # one line: what it does
    config: tuple[str, ...]  # config sections / "section.key" settings it reads
    reads: tuple[str, ...] = ()  # tables written by other stages that it reads
    writes: tuple[str, ...] = ()  # tables it writes
    needs: tuple[str, ...] = ()  # stages that must have finished before it runs
    after: tuple[str, ...] = ()  # stages whose tables it reads if they ran
    steps: tuple[str, ...] = ()  # what it does, in order (for the help and the docs)
    owns: Mapping[str, str] = field(default_factory=dict)  # table -> the rows that are its own
    # flags of its CLI verb that set a key of its config section before the run: key -> help
    options: Mapping[str, str] = field(default_factory=dict)
    # settings of `config` whose change cannot change what the stage wrote, and why
    # ("section.key" or a whole "section" -> the reason); a rerun after such a change says
    # the reason instead of redoing the work (see `unaffected_reason`)
    unaffected: Mapping[str, str] = field(default_factory=dict)
    # the whole run (its stage record included) is one transaction: it commits or rolls back
    # as one (the runner opens it: corpus_audit/core/stage_runner.py)
    atomic: bool = False

    def unaffected_reason(self, key: str) -> str | None:
        """Why a change of setting ``key`` (``section.key``) cannot change this stage's
        results, or None when it can (then a rerun redoes what it changes)."""
        return self.unaffected.get(key, self.unaffected.get(key.partition(".")[0]))


STAGES: Registry[Stage] = Registry("stage")

# Reasons a changed setting cannot change a stage's results (`Stage.unaffected`).
SPEED = "affects only speed and memory (batch sizes, threads, processes), not the results"
DEVICE = "where the models run; the stored results are kept"
CACHE = "where embeddings and indexes are cached; the values are the same"
NAME = "the study's name is only shown in reports"
TRANSPORT = (
    "how API requests are sent (concurrency, time-outs, retries, body cap), not what they ask"
)
NOT_READ = "read by other stages, not by this one"
# the settings of earlier stages that are only their speed or cache
UPSTREAM_SPEED = {
    "select.batch_rows": SPEED,
    "select.prefilter": "select's RE2 prefilter: the same matches, faster",
    "indicators.batch_size": SPEED,
    "indicators.ner_batch_size": SPEED,
    "indicators.ner_processes": SPEED,
    "neighbors.batch_size": SPEED,
    "neighbors.chunk_size": SPEED,
    "neighbors.cache_dir": CACHE,
    "neighbors.index_dir": CACHE,
    "label.batch_size": SPEED,
    "engine.device": DEVICE,
}
LABEL_SPEED = {
    "label.batch_size": SPEED,
    "engine.device": DEVICE,
    "study.seed": "seeds only a classifier with random weights (clip_pretrained = random)",
    "label.age": (
        "on: the next run estimates the perceived age of the kept images lacking it; off: "
        "the stored perceived_age rows are kept and no new ones are written"
    ),
    "label.skin_tone": (
        "on: the next run measures the skin tone of the images lacking it; off: the stored "
        "skin_tone rows are kept and no new ones are written"
    ),
}
GENERATE_TRANSPORT = {
    f"generate.{key}": TRANSPORT
    for key in (
        "api_concurrency",
        "api_timeout",
        "api_max_body_mb",
        "api_max_retries",
        "api_backoff",
        "api_max_backoff",
    )
} | {
    "generate.api_prices": "only the cost estimate printed with the images",
    "generate.channels_last": SPEED,
    "generate.compile": SPEED,
    "generate.paraphrase_batch_size": SPEED,
}


def declare(stage: Stage) -> Stage:
    """Add ``stage`` to the catalogue (in run order; see :data:`RUN_ORDER` for repeats).
    Its ``unaffected`` keeps only the settings its ``config`` covers (shared tables of
    reasons name settings of several stages)."""
    covered = set(stage.config)
    unaffected = {
        key: why
        for key, why in stage.unaffected.items()
        if key in covered or key.partition(".")[0] in covered
    }
    return STAGES.register(stage.name, replace(stage, unaffected=unaffected))


declare(
    Stage(
        "select",
        "corpus_audit.stages.select:select",
        "find the captions that mention each occupation and draw the keyword sample",
        config=("study", "corpus", "storage", "select", "lexicon"),
        writes=("corpus_files", "captions", "mentions", "prompts", "prompt_categories", "samples"),
        steps=(
            "read each corpus file (text and URL columns, null and non-text captions counted)",
            "match every occupation form in each batch (select.matcher: hyperscan, one "
            "multi-pattern pass in the scan tasks, or the RE2 prefilter + DuckDB SQL)",
            "draw the keyword sample per occupation (md5 of seed and caption, reproducible)",
        ),
        owns={
            "samples": "strategy = 'keyword'",
            "prompts": "when the study has a corpus",
            "prompt_categories": "when the study has a corpus",
        },
        unaffected={
            "study.name": NAME,
            "storage.retries": "how often a failed read is retried; the rows read are the same",
            "select.batch_rows": SPEED,
            "select.prefilter": "the RE2 prefilter only skips rows that cannot match: same matches",
            "lexicon.gender_terms": NOT_READ + " (indicators)",
            "lexicon.labor_stats": NOT_READ + " (analyze, report, who_how)",
            "lexicon.official_stats": NOT_READ + " (categories)",
        },
        atomic=True,  # a failed rescan leaves the last selection whole
    )
)
# A model audited without its training data (`init --kind images`, docs/model_only.md): its
# prompts come from the lexicon alone, no corpus read.
declare(
    Stage(
        "prompts",
        "corpus_audit.stages.prompts:prompts",
        "the lexicon's prompts of a study without a corpus (init --kind images)",
        config=("lexicon",),
        writes=("prompts", "prompt_categories"),
        steps=(
            "render lexicon.prompts over the occupations (templated sets and prompt tables)",
            "replace prompts and prompt_categories when they changed",
        ),
        owns={
            "prompts": "when the study has no corpus",
            "prompt_categories": "when the study has no corpus",
        },
    )
)
declare(
    Stage(
        "indicators",
        "corpus_audit.stages.indicators:indicators",
        "flag captions with explicit gender indicators and draw the no-indicator sample",
        config=(
            "study",
            "lexicon",
            "select",
            "indicators",
            "corpus.groups",
            "corpus.hypernymized",
            "analysis.confidence",
        ),
        reads=("captions", "mentions", "corpus_files"),
        writes=(
            "indicators",
            "indicator_triggers",
            "indicator_texts",
            "indicator_settings",
            "samples",
            "corpus_file_groups",
            "corpus_summary",
        ),
        needs=("select",),
        steps=(
            "gender words and pronouns on every selected caption",
            "first names: spaCy NER (only where it can change the label) + gender-guesser",
            "draw the no-indicator sample from the captions without indicators",
            "per corpus group (corpus.groups) and pooled: captions and indicator shares",
        ),
        owns={"samples": "strategy = 'no_indicators'"},
        unaffected={
            "study.name": NAME,
            **UPSTREAM_SPEED,
            "lexicon.labor_stats": NOT_READ + " (analyze, report, who_how)",
            "lexicon.official_stats": NOT_READ + " (categories)",
        },
    )
)
declare(
    Stage(
        "neighbors",
        "corpus_audit.stages.neighbors:neighbors",
        "pick the captions nearest each prompt (SBERT embeddings + FAISS)",
        config=("neighbors", "select", "indicators", "lexicon", "study.seed"),
        reads=("captions", "mentions", "prompts", "indicators"),
        writes=(
            "embedding_files",
            "caption_embeddings",
            "prompt_embeddings",
            "samples",
            "similarity_diagnostics",
            "neighbors_progress",
        ),
        needs=("select", "indicators"),
        steps=(
            "embed captions and prompts (content-addressed cache, length-sorted batches)",
            "per occupation: FAISS index over its captions, k nearest per prompt",
            "write the nn and nn_no_indicators samples and the similarity diagnostics",
        ),
        owns={"samples": "strategy IN ('nn', 'nn_no_indicators')"},
        unaffected={
            **UPSTREAM_SPEED,
            "lexicon.labor_stats": NOT_READ + " (analyze, report, who_how)",
            "lexicon.official_stats": NOT_READ + " (categories)",
        },
    )
)
declare(
    Stage(
        "images",
        "corpus_audit.stages.images:images",
        "find the training images of the sampled captions in the configured sources",
        config=("images", "corpus", "select"),
        reads=("captions", "mentions", "samples"),
        writes=("images", "image_skips", "image_shards", "download_stats"),
        after=("select", "indicators", "neighbors"),
        steps=(
            "read each source (directory, webdataset, parquet, HF, img2dataset, URLs)",
            "link its images to the sampled captions (by caption id, URL or key)",
            "write the image rows and the reasons images were skipped",
        ),
        owns={"images": "source = 'training'"},
        unaffected=UPSTREAM_SPEED,
    )
)
declare(
    Stage(
        "generate",
        "corpus_audit.stages.generate:generate",
        "generate images for every prompt with each configured text-to-image model",
        # The caption prompts are the training subsets after the cut, which generate makes
        # itself (corpus_audit/tables/subsets.py: `training_subsets` is written later, by analyze):
        # hence the cut's settings. Its `images`, `face_filter` and `labels` inputs are not
        # fingerprinted: generate writes `images` itself, and the second `label` run of
        # `corpus-audit run` adds the generated images' rows to the other two, which would
        # flag every finished run as stale.
        config=(
            "generate",
            "study",
            "lexicon",
            "select",
            "neighbors.k",
            "indicators.no_indicator_sample",
            "analysis.classifier",
            "analysis.threshold",
            "label.classifier",
            "engine.device",
        ),
        reads=("prompts", "samples", "captions", "mentions", "indicators", "pst_prompts"),
        writes=("images", "generated_images", "generation_settings", "paraphrases", "api_images"),
        after=("select", "indicators", "neighbors", "pst_prompts"),
        steps=(
            "the prompts: templates, paraphrases and the captions of the labelled cut",
            "per model: batches with seeds derived from the study seed, stored as PNG",
        ),
        owns={"images": "source = 'generated'"},
        unaffected={"study.name": NAME, **UPSTREAM_SPEED, **GENERATE_TRANSPORT},
    )
)
declare(
    Stage(
        "label",
        "corpus_audit.stages.label:label",
        "keep images with one face and label its perceived gender",
        config=("label", "images.max_pixels", "engine.device", "study.seed"),
        reads=("images",),
        writes=("face_filter", "faces", "labels", "perceived_age", "skin_tone"),
        after=("images", "generate"),
        steps=(
            "decode each image within the pixel budget",
            "face detection (MediaPipe): keep images with exactly one face",
            "perceived-gender classifier on the kept images",
            "perceived age and skin tone of the kept face (label.age, label.skin_tone)",
        ),
        unaffected=LABEL_SPEED,
    )
)
#: the misclassification correction's tables (``analyze``: stages/analyze/correction.py)
CORRECTION_RESULTS = (
    "classifier_errors",
    "percent_female_corrected",
    "amplification_corrected",
    "amplification_summary_corrected",
)
#: perceived age and skin tone per set and pair (``analyze``: stages/analyze/attributes.py)
ATTRIBUTE_RESULTS = (
    "attribute_distribution",
    "attribute_summary",
    "attribute_change",
    "attribute_amplification",
    "attribute_intersections",
    "attribute_official",
    "attribute_errors",
)
#: the result tables of ``analyze`` (beside its ``training_subsets``), all read by ``report``
ANALYZE_RESULTS = (
    "percent_female",
    "amplification",
    "amplification_summary",
    "image_similarity",
    "indicator_match",
    "occupation_indicators",
    "indicator_correlation",
    *CORRECTION_RESULTS,
    "generated_gender",
    *ATTRIBUTE_RESULTS,
)
declare(
    Stage(
        "analyze",
        "corpus_audit.stages.analyze:analyze",
        "training vs generated %female, amplification per strategy, statistics",
        config=("analysis", "study", "select", "indicators", "neighbors", "label"),
        reads=(
            "samples",
            "prompts",
            "prompt_categories",
            "images",
            "face_filter",
            "labels",
            "mentions",
            "indicators",
            "perceived_age",
            "skin_tone",
        ),
        writes=("training_subsets", *ANALYZE_RESULTS),
        after=("select", "indicators", "neighbors", "images", "generate", "label"),
        steps=(
            "cut each training subset at N labelled images",
            "%female per subset and prompt, amplification with the direction rule",
            "bootstrap intervals, indicator match and correlation, image similarity",
        ),
        unaffected={
            "study.name": NAME,
            "analysis.thumbnails": "only how many thumbnails the report shows",
            **UPSTREAM_SPEED,
        },
    )
)
# LLM-written texts (docs/who_vs_how.md): the texts of `who_how` in an LLM study
declare(
    Stage(
        "llm_texts",
        "corpus_audit.stages.llm_texts:llm_texts",
        "LLM-written biographies and personas per occupation, drawn by the paper's rule",
        config=("llm", "study.seed", "texts.association_terms", "engine.device"),
        writes=("llm_texts", "llm_pairs", "llm_models"),
        steps=(
            "the (occupation, prompt, gender) pairs of the prompt and occupation files",
            "per model: batches of n, every batch committed as it arrives (resumable)",
            "unspecified prompts until n texts a side, abandoned below 10 % of n",
        ),
        unaffected={
            **{
                f"llm.{key}": TRANSPORT
                for key in (
                    "concurrency",
                    "timeout_s",
                    "max_body_mb",
                    "max_retries",
                    "backoff_s",
                    "max_backoff_s",
                )
            },
            "llm.batch_size": SPEED,
            "engine.device": DEVICE,
        },
    )
)

declare(
    Stage(
        "who_how",
        "corpus_audit.stages.who_how:who_how",
        "who is represented and how: gender association, marked words, SRBS of the texts",
        config=("texts", "lexicon", "analysis.confidence", "corpus"),
        reads=("captions", "mentions", "indicators", "indicator_triggers", "llm_texts"),
        writes=(
            "texts_documents",
            "texts_occupations",
            "texts_settings",
            "texts_associations",
            "texts_agreement",
            "texts_who",
            "texts_deciles",
            "texts_marked_words",
            "texts_marked_summary",
            "texts_calibration",
            "texts_srbs",
            "texts_srbs_tests",
        ),
        after=("select", "indicators", "llm_texts"),
        steps=(
            "the texts: occupation captions, the files of a text corpus, or LLM texts (per model)",
            "gender association of every text (batches committed, resumable)",
            "agreement, who vs labour statistics, calibrated marked words, SRBS",
        ),
        unaffected={"texts.batch_size": SPEED},
    )
)
declare(
    Stage(
        "categories",
        "corpus_audit.stages.categories:categories",
        "%female per occupational category of the MAGBIG/BAFIS prompts vs official statistics",
        config=(
            "lexicon.categories",
            "lexicon.official_stats",
            "analysis.classifier",
            "analysis.threshold",
            "analysis.confidence",
        ),
        reads=("prompt_categories", "prompts", "images", "face_filter", "labels"),
        writes=("category_distribution",),
        after=("select", "generate", "label"),
        steps=(
            "labelled generated images of the prompt-table prompts (face filter kept)",
            "per model, language, variant and category: shares with Wilson intervals",
            "the official %female of each category for the prompt's language, and the gap",
        ),
    )
)
declare(
    Stage(
        "recaption",
        "corpus_audit.stages.recaption:recaption_stage",
        "caption the training images with a captioning model (a new caption variant)",
        config=("recaption", "engine.device", "images.max_pixels"),
        reads=("images", "captions"),
        writes=("recaptions",),
        after=("select", "images"),
        steps=(
            "load the captioner (local model or cached hub id; never downloads)",
            "decode each batch of training images ahead of the model, caption it",
            "one transaction per batch into recaptions (kill -9 loses one batch)",
        ),
        owns={"recaptions": "variant = recaption.variant"},
        options={
            "model": "captioning model: a local directory, a cached hub id, or paraphrase:SPEC",
            "variant": "name of the caption variant to write (default: recaption.variant)",
        },
        unaffected={"recaption.batch_size": SPEED, "engine.device": DEVICE},
    )
)
declare(
    Stage(
        "variants",
        "corpus_audit.stages.variants:variants",
        "label every caption variant and compare each with the baseline, paired over images",
        config=(
            "variants",
            "indicators",
            "lexicon",
            "select.batch_rows",
            "study.seed",
            "analysis.confidence",
            "neighbors",
            "engine.device",
        ),
        reads=("corpus_files", "captions", "prompts", "images", "recaptions"),
        writes=(
            "caption_variants",
            "variant_mentions",
            "variant_rates",
            "variant_mention_changes",
            "variant_mention_flips",
            "variant_image_changes",
            "variant_transitions",
            "variant_transition_examples",
            "variant_differences",
            "variant_similarity",
        ),
        needs=("select",),
        after=("images", "recaption"),
        steps=(
            "read each variant's column of the corpus (and the recaptions of training images)",
            "keep the rows that mention an occupation in any variant; label every caption",
            "compare each variant with the baseline: rates, transitions, paired differences",
        ),
        unaffected=UPSTREAM_SPEED,
    )
)
declare(
    Stage(
        "report",
        "corpus_audit.report:report",
        "write the HTML report with figures and tables",
        config=("analysis", "study"),
        reads=(
            *ANALYZE_RESULTS,
            "similarity_diagnostics",
            "texts_who",
            "texts_marked_words",
            "category_distribution",
            "variant_differences",
            # also preference_ratings, written by `battles import` (COMMAND_STAGES), not a
            # stage of `run`: the report's own fingerprint sees it (report.report_fingerprint)
        ),
        after=(
            "select",
            "indicators",
            "neighbors",
            "images",
            "generate",
            "label",
            "analyze",
            "who_how",
            "categories",
            "variants",
        ),
        steps=("figures (PNG)", "the HTML page, every corpus text escaped"),
    )
)

# -- the Paired Stereotype Test (docs/pst.md); `corpus-audit run` runs them in a PST study --
PST_SCORE_TABLES = ("pst_scores", "pst_gap", "pst_both_any", "pst_labor", "pst_labor_correlation")
declare(
    Stage(
        "pst_prompts",
        "corpus_audit.stages.pst_prompts:pst_prompts",
        "PST: expand the roles and templates into the single, paired and power prompts",
        config=("pst.roles", "pst.templates", "pst.kinds", "pst.fair", "pst.power_singles"),
        writes=("pst_prompts",),
        steps=("read the roles and templates files", "write every prompt with its sides' roles"),
    )
)
declare(
    Stage(
        "pst_label",
        "corpus_audit.stages.pst_label:pst_label",
        "PST: keep images with two large faces, label each person by position",
        config=("label", "images.max_pixels", "engine.device", "study.seed"),
        reads=("pst_prompts", "images", "face_filter", "faces"),
        writes=("pst_face_filter", "pst_people"),
        needs=("pst_prompts", "label"),
        after=("generate",),
        steps=(
            "the two-face rule on the stored faces (single prompts: the one-face rule)",
            "each person's crop through the perceived-gender classifier",
        ),
        unaffected=LABEL_SPEED,
    )
)
declare(
    Stage(
        "faircritic",
        "corpus_audit.stages.faircritic:faircritic",
        "PST: FairCritic rounds of generate, judge and feedback per paired prompt",
        config=("pst", "generate", "label", "engine.device", "study.seed"),
        reads=("pst_prompts",),
        writes=("pst_rounds",),
        needs=("pst_prompts",),
        steps=(
            "per prompt and round: generate a batch, judge it with the labeller",
            "biased: append the feedback writer's guidelines for the next round",
        ),
        unaffected={**LABEL_SPEED, **GENERATE_TRANSPORT},
    )
)
declare(
    Stage(
        "pst_captions",
        "corpus_audit.stages.pst_captions:pst_captions",
        "PST: roles with a gender attached in the corpus captions (spaCy parse)",
        config=("corpus", "pst.roles", "lexicon.gender_terms", "lexicon.occupations"),
        writes=("pst_caption_files", "pst_caption_mentions"),
        steps=("RE2 prefilter, then the dependency parse of the candidate captions",),
    )
)
declare(
    Stage(
        "pst_analyze",
        "corpus_audit.stages.pst_analyze:pst_analyze",
        "PST: Stereotype Score, single vs paired gap, PST-Both/Any, labour statistics",
        config=("analysis.bootstrap", "analysis.confidence", "study.seed", "lexicon.labor_stats"),
        reads=("pst_people", "pst_caption_mentions"),
        writes=(*PST_SCORE_TABLES, "pst_caption_roles"),
        after=("pst_label", "pst_captions"),
        steps=(
            "image side: the persons of the configured classifier",
            "caption side: the (caption, role) units of the corpus",
        ),
    )
)
declare(
    Stage(
        "pst_report",
        "corpus_audit.report.pst_report:pst_report",
        "PST: the HTML report section and a CSV of every PST table",
        config=("study.name",),
        reads=(*PST_SCORE_TABLES, "pst_caption_roles", "pst_rounds", "pst_face_filter"),
        needs=("pst_analyze",),
        after=("faircritic",),
        steps=("figures (PNG)", "report/pst.html, every corpus text escaped", "report/pst/*.csv"),
    )
)

STAGE_NAMES = list(STAGES.names())
# What `corpus-audit run` executes: `label` runs before `generate` too, because the training
# subsets are cut at N labelled training images and the captions used as prompts come from
# that cut (corpus_audit/tables/subsets.py); its second run labels the generated images. Each run
# only labels what has no label yet, so the second one does not repeat the first's work.
RUN_ORDER = [
    "select",
    "indicators",
    "neighbors",
    "images",
    "label",
    "generate",
    "label",
    "analyze",
    "who_how",
    "categories",
    "variants",
    "report",
]

# What `corpus-audit run` executes in a PST study (`[pst] enabled`; `init --kind pst`).
PST_RUN_ORDER = [
    "pst_prompts",
    "generate",
    "label",
    "pst_label",
    "faircritic",
    "pst_captions",
    "pst_analyze",
    "pst_report",
]
# What `corpus-audit run` executes in an LLM study (`[llm] enabled`; `init --kind llm`).
LLM_RUN_ORDER = ["llm_texts", "who_how", "report"]
# What `corpus-audit run` executes in a study without a corpus (`init --kind images`): the
# images are generated (generate.models) or imported (`import-images`) for the prompts.
IMAGES_RUN_ORDER = ["prompts", "generate", "label", "analyze", "categories", "report"]
RUN_ORDERS = {  # study kind -> run order
    "amplification": RUN_ORDER,
    "pst": PST_RUN_ORDER,
    "llm": LLM_RUN_ORDER,
    "images": IMAGES_RUN_ORDER,
}
# Stages no run order includes: they run when asked (`corpus-audit recaption DIR --model ...`).
ON_DEMAND = ("recaption",)


# The schema's tables that no stage writes, and what writes them: the bookkeeping of every run
# (:meth:`corpus_audit.core.store.Study.stage`) and the migrations. No stage reads them as an input.
OTHER_WRITERS: Mapping[str, str] = {
    "stage_runs": "corpus_audit.core.store:Study.stage",
    "stage_unfinished": "corpus_audit.core.store:Study.stage",
    "schema_version": "corpus_audit.core.store:Study.migrate",
}


# -- stages a command runs with its own arguments (`import-images`, `battles`, `validate`) -----
# Declared like the others (status shows their runs, require_inputs and the help know what they
# read and write), but no run order includes them and they have no verb of their own name: the
# command runs them (its verb -> its stage function, which takes the command's arguments).
# stage -> the command that runs it
COMMAND_STAGES: Mapping[str, str] = {
    "import_images": "import-images",
    "battles_export": "battles export",
    "battles_import": "battles import",
    "battles_arena_import": "battles import",
    "validate_export": "validate export",
    "validate_import": "validate import",
}
declare(
    Stage(
        "import_images",
        "corpus_audit.stages.import_images:import_images",
        "register another model's images (a manifest, a folder per prompt, BAFIS) as generated",
        config=("images.max_pixels",),
        reads=("prompts", "prompt_categories"),
        writes=("images", "image_imports", "imported_images", "import_skips"),
        after=("select", "prompts", "pst_prompts"),
        steps=(
            "read each source with the first layout that claims it (csv, jsonl, folder, bafis)",
            "match every entry to one prompt of the study; refuse a bad source before writing",
            "hash and open every file on the engine; one transaction for every source's rows",
        ),
        owns={"images": "origin LIKE 'import:%'"},
    )
)
declare(
    Stage(
        "battles_export",
        "corpus_audit.stages.battles:export_battles",
        "draw battles between the study's models and write the voting page and pair manifest",
        config=("study",),
        reads=("images", "prompts"),
        writes=("battle_pairs",),
        after=("generate", "import_images"),
        steps=("draw n battles (same prompt, two models)", "the page, pairs.csv, battle_pairs"),
    )
)
declare(
    Stage(
        "battles_import",
        "corpus_audit.stages.battles:import_battles",
        "store the annotators' votes and recompute the models' preference ratings",
        config=("study",),
        reads=("battle_pairs",),
        writes=("battles", "preference_ratings", "preference_pairs"),
        needs=("battles_export",),
        steps=("read the vote CSVs against battle_pairs", "Elo, Bradley-Terry, pair matrix"),
    )
)
declare(
    Stage(
        "battles_arena_import",
        "corpus_audit.stages.arena:import_arena",
        "store the votes of another arena (BAFIS / LMSYS) and recompute its leaderboard",
        config=("study",),
        writes=("arena_votes", "arena_ratings", "arena_pairs"),
        steps=("read every vote file", "add the new votes; the leaderboard and pairs again"),
    )
)
declare(
    Stage(
        "validate_export",
        "corpus_audit.stages.validate:export_sheet",
        "the human-validation sheet: a stratified sample of labelled images (HTML + CSV)",
        config=("label", "study"),
        reads=("images", "labels"),
        writes=("validation_items",),
        needs=("label",),
        steps=("draw the stratified sample", "write the sheet and validation_items"),
    )
)
declare(
    Stage(
        "validate_import",
        "corpus_audit.stages.validate:import_labels",
        "the annotators' answers: alpha and the classifier's agreement with their majority",
        config=("label",),
        reads=("validation_items", "images", "labels"),
        writes=("human_labels", "validation_agreement"),
        needs=("validate_export",),
        steps=("read the answer CSVs", "human_labels, alpha, agreement per source"),
    )
)
#: the stages run by their own name (their verbs, `run`, `Study.run`): all but COMMAND_STAGES
STAGE_NAMES = [name for name in STAGES.names() if name not in COMMAND_STAGES]


def command(name: str) -> str:
    """The ``corpus-audit`` command that runs stage ``name`` (``battles export``; the stage's
    own name for a stage with a verb of its own)."""
    return COMMAND_STAGES.get(name, name)


def stage(name: str) -> Stage:
    """The declaration of stage ``name`` (a :class:`ConfigError` naming the known stages)."""
    return STAGES.get(name)


def writers(table: str) -> list[str]:
    """The stages that write ``table``, in catalogue order."""
    return [s.name for _, s in STAGES.items() if table in s.writes]


def readers(table: str) -> list[str]:
    """The stages that read ``table`` as an input, in catalogue order."""
    return [s.name for _, s in STAGES.items() if table in s.reads]


def data_flow() -> str:
    """The data-flow picture of docs/architecture.md: per stage (in run order: the audit's, the
    on-demand stages, the PST's, the LLM study's; then the stages commands run), each table it
    writes and the stages that read it (``stages -> tables -> stages``). Rows a stage owns in
    a shared table are shown after the name. ``python -m corpus_audit.core.catalogue`` prints it; a
    test keeps the page equal to it."""
    lines = []
    width = max(len(t) + len(o) + 3 for _, s in STAGES.items() for t, o in _outputs(s))
    orders = [*RUN_ORDER, *ON_DEMAND, *PST_RUN_ORDER, *LLM_RUN_ORDER, *IMAGES_RUN_ORDER]
    orders += COMMAND_STAGES  # the stages commands run (import-images, battles, validate)
    pad = max(len(name) for name in orders)  # the stage-name column
    for name in dict.fromkeys(orders):
        outputs = _outputs(STAGES.get(name)) or [("(files only)", "")]
        for i, (table, owned) in enumerate(outputs):
            shown = f"{table} [{owned}]" if owned else table
            read_by = ", ".join(r for r in readers(table) if r != name) or "-"
            if len(outputs) == 1:
                branch = f"{name:<{pad}} ───>"
            elif i == 0:
                branch = f"{name:<{pad}} ─┬─>"
            else:
                branch = " " * (pad + 2) + ("└─>" if i == len(outputs) - 1 else "├─>")
            lines.append(f"{branch} {shown:<{width}} ──> {read_by}".rstrip())
    return "\n".join(lines) + "\n"


def _outputs(spec: Stage) -> list[tuple[str, str]]:
    """``(table, rows it owns or "")`` for each table ``spec`` writes."""
    return [(t, spec.owns.get(t, "")) for t in spec.writes]


if __name__ == "__main__":
    print(data_flow(), end="")
