-- Tables of the `analyze` stage. Owner: corpus_audit/stages/analyze/
-- The stage rewrites all of them in one transaction; percentages are 0-100, amplification is in
-- percentage points (METHODS 1.7), intervals are at analysis.confidence (default 95 %).
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

-- %female of a training subset or a generated set, with a Wilson interval.
-- Captions-as-prompts sets: strategy captions_as_prompts[_no_indicators] (paraphrased_captions[...]
-- for paraphrases), template_id 0, model_id set on both sides (the captions a model was
-- prompted with define the training set).
CREATE TABLE IF NOT EXISTS percent_female (
    side         VARCHAR NOT NULL,           -- training | generated
    model_id     VARCHAR,                    -- generated sets
    strategy     VARCHAR,                    -- training subsets
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,
    template_id  INTEGER,
    n_female     INTEGER NOT NULL,
    n_male       INTEGER NOT NULL,
    percent_female DOUBLE,                   -- NULL when n_female + n_male = 0
    ci_low       DOUBLE,
    ci_high      DOUBLE,
    n_images     INTEGER,                    -- images of the set before face filter / labels
                                             -- (training: of the candidates the cut went through)
    n_captions   INTEGER,                    -- training subset / caption-prompt set: its captions
    n_target     INTEGER,                    -- training subset: the N it is cut at (NULL: split)
    n_candidates INTEGER,                    -- training subset: ranked candidate captions
    shortfall    VARCHAR                     -- training subset short of N: pending | candidates
                                             -- (raise select.overdraw) | corpus; NULL when full
);
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_images INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_captions INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_target INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_candidates INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS shortfall VARCHAR;

-- The training subsets after the cut (corpus_audit/tables/subsets.py): one row per caption in a
-- subset, with its training image and that image's label (female | male; with
-- select.sample_unit = 'captions' also ambiguous | dropped | no_image | pending). T is the
-- %female of a subset's female/male rows.
CREATE TABLE IF NOT EXISTS training_subsets (
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,                    -- NULL for per-occupation strategies
    caption_id   BIGINT NOT NULL,
    rank         INTEGER NOT NULL,           -- rank in the subset's candidate list (samples)
    image_id     VARCHAR,
    label        VARCHAR NOT NULL
);

-- Amplification per (model, strategy, occupation, prompt template).
-- template_id 0 = captions as prompts (the captions themselves were the prompts).
CREATE TABLE IF NOT EXISTS amplification (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    template_id  INTEGER NOT NULL,
    training_pf  DOUBLE,
    generated_pf DOUBLE,
    amplification DOUBLE,                    -- |G-50| - |T-50|; NULL when T or G is missing
    excluded     BOOLEAN NOT NULL,
    exclude_reason VARCHAR,                  -- direction_switch | no_training_labels | no_generated_labels
    training_n   INTEGER,                    -- labelled training images behind training_pf
    generated_n  INTEGER                     -- labelled generated images behind generated_pf
);
ALTER TABLE amplification ADD COLUMN IF NOT EXISTS training_n INTEGER;
ALTER TABLE amplification ADD COLUMN IF NOT EXISTS generated_n INTEGER;

-- Mean amplification per (model, strategy, prompt template) and overall (template_id NULL:
-- the mean of the per-prompt means). The paper's Table 3 is this table pivoted.
CREATE TABLE IF NOT EXISTS amplification_summary (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    template_id  INTEGER,                    -- NULL = average over prompts
    n_included   INTEGER NOT NULL,           -- occupations averaged (per prompt); pairs (average)
    n_excluded   INTEGER NOT NULL,
    n_prompts    INTEGER,                    -- average row: prompts with a mean
    mean_amplification DOUBLE,               -- NULL when every occupation was excluded
    ci_low       DOUBLE,                     -- bootstrap percentile interval
    ci_high      DOUBLE,
    t_stat       DOUBLE,                     -- one-sample t-test of mean = 0 (per prompt;
    p_value      DOUBLE                      --   captions-as-prompts average row too)
);

-- CLIP image-image similarity (METHODS 1.5 diagnostics): per (model, strategy, occupation,
-- prompt template) the mean cosine over all (training image, generated image) pairs of the
-- labelled images behind T (the subset after the cut) and G (analysis/image_similarity.py).
CREATE TABLE IF NOT EXISTS image_similarity (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    template_id  INTEGER,
    prompt_id    VARCHAR,                    -- the generated set's prompt
    n_training   INTEGER NOT NULL,
    n_generated  INTEGER NOT NULL,
    mean_cosine  DOUBLE,                     -- in [-1, 1]
    clip_model   VARCHAR NOT NULL            -- the CLIP model id (label.clip_model / _pretrained)
);

-- Captions with a one-sided indicator used as prompts: share of their labelled generated images
-- whose perceived gender matches a reference: the caption's indicator (reference 'indicator'),
-- or the paper's, the perceived gender of the caption's training image ('training_image',
-- captions whose training image is labelled). indicator = the reference's value: male |
-- female | any.
CREATE TABLE IF NOT EXISTS indicator_match (
    model_id     VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,           -- caption | paraphrase (the prompt was its paraphrase)
    reference    VARCHAR,                    -- indicator | training_image (the paper's)
    indicator    VARCHAR NOT NULL,
    n_images     INTEGER NOT NULL,
    n_match      INTEGER NOT NULL,
    percent_match DOUBLE,
    ci_low       DOUBLE,
    ci_high      DOUBLE
);

ALTER TABLE indicator_match ADD COLUMN IF NOT EXISTS reference VARCHAR;

-- Per occupation: indicator labels of the captions that mention it (caption side) and of the
-- captions of its labelled keyword-sample training images (image side).
CREATE TABLE IF NOT EXISTS occupation_indicators (
    occupation   VARCHAR NOT NULL,
    n_captions   INTEGER NOT NULL,           -- captions mentioning it
    n_checked    INTEGER NOT NULL,           -- of those, labelled by the indicators stage
    n_male       INTEGER NOT NULL,
    n_female     INTEGER NOT NULL,
    n_both       INTEGER NOT NULL,
    n_none       INTEGER NOT NULL,
    pct_any      DOUBLE,                     -- % of n_checked with any indicator
    pct_male     DOUBLE,                     -- male only
    pct_female   DOUBLE,                     -- female only
    pct_both     DOUBLE,
    n_female_images INTEGER,                 -- labelled keyword-sample training images
    n_male_images   INTEGER,
    pct_marked_female_images DOUBLE,         -- % of female images whose caption has an indicator
    pct_marked_male_images   DOUBLE,
    training_pf  DOUBLE,                     -- %female of those images
    pct_female_indicator DOUBLE              -- % of their captions with a female (or both) indicator
);

-- Pearson r across occupations between training %female and % female-indicator captions.
CREATE TABLE IF NOT EXISTS indicator_correlation (
    strategy     VARCHAR NOT NULL,
    n_occupations INTEGER NOT NULL,
    r            DOUBLE,
    p_value      DOUBLE
);
