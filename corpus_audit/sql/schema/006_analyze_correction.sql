-- Tables of the `analyze` stage's misclassification correction (docs/analysis.md, "Correcting
-- for the classifier's errors"). Owner: corpus_audit/stages/analyze/correction.py
-- They stand beside the uncorrected tables of 001_analyze.sql (which stay as they are) and are
-- rewritten with them in one transaction. Percentages are 0-100, amplification is in
-- percentage points, intervals at analysis.confidence. Migration 6, idempotent.

-- The classifier's error rates per image source (analysis.correction = 'per_source': training,
-- and each generated model) or pooled (source 'pooled'), from the validated images (human
-- majority female or male), weighted by the inverse of their stratum's sampling fraction.
CREATE TABLE IF NOT EXISTS classifier_errors (
    source       VARCHAR NOT NULL,           -- training | <model_id> | pooled
    n_validated  INTEGER NOT NULL,           -- validated images (majority female or male)
    n_female     INTEGER NOT NULL,           -- of them, women (by the human majority)
    n_male       INTEGER NOT NULL,
    sensitivity  DOUBLE,                     -- % of women labelled female
    sensitivity_low DOUBLE,                  -- Wilson interval at Kish's effective n
    sensitivity_high DOUBLE,
    specificity  DOUBLE,                     -- % of men labelled male
    specificity_low DOUBLE,
    specificity_high DOUBLE,
    ambiguous_female DOUBLE,                 -- % of women labelled ambiguous
    ambiguous_female_low DOUBLE,
    ambiguous_female_high DOUBLE,
    ambiguous_male DOUBLE,                   -- % of men labelled ambiguous
    ambiguous_male_low DOUBLE,
    ambiguous_male_high DOUBLE,
    applied      BOOLEAN NOT NULL,           -- whether these rates correct the source's sets
    reason       VARCHAR                     -- why not (no validation labels, too few, ...)
);

-- %female of every set of percent_female, corrected (Rogan-Gladen with the ambiguous shares).
CREATE TABLE IF NOT EXISTS percent_female_corrected (
    side         VARCHAR NOT NULL,           -- training | generated
    model_id     VARCHAR,
    strategy     VARCHAR,
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,
    template_id  INTEGER,
    n_labelled   INTEGER NOT NULL,           -- female + male images (as percent_female)
    percent_female DOUBLE,                   -- uncorrected, as in percent_female
    corrected_pf DOUBLE,                     -- NULL: no correction (see note)
    ci_low       DOUBLE,                     -- bootstrap of the set's images and the validation
    ci_high      DOUBLE,
    error_source VARCHAR,                    -- the classifier_errors source whose rates it used
    note         VARCHAR                     -- why there is no corrected_pf
);

-- Amplification from the corrected %female, with the paper's exclusion rule (as amplification).
CREATE TABLE IF NOT EXISTS amplification_corrected (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    template_id  INTEGER NOT NULL,
    training_pf  DOUBLE,                     -- corrected T
    generated_pf DOUBLE,                     -- corrected G
    amplification DOUBLE,
    excluded     BOOLEAN NOT NULL,
    exclude_reason VARCHAR,                  -- as amplification, or no_correction
    uncorrected_amplification DOUBLE,        -- amplification.amplification of the same pair
    uncorrected_excluded BOOLEAN
);

-- amplification_summary from the corrected pairs: same t-tests; bootstrap intervals that also
-- resample the validation labels.
CREATE TABLE IF NOT EXISTS amplification_summary_corrected (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    template_id  INTEGER,                    -- NULL = average over prompts
    n_included   INTEGER NOT NULL,
    n_excluded   INTEGER NOT NULL,
    n_prompts    INTEGER,
    mean_amplification DOUBLE,
    ci_low       DOUBLE,
    ci_high      DOUBLE,
    t_stat       DOUBLE,
    p_value      DOUBLE,
    note         VARCHAR                     -- "no correction (...)" when a side has none
);
