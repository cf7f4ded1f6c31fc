-- Tables of the `analyze` stage's perceived-attribute analysis (docs/attributes.md): perceived
-- age and skin tone (the label stage's perceived_age and skin_tone) per image set, their change
-- from training to generated images, multi-class amplification and the gender x tone x age
-- cells. Owner: corpus_audit/stages/analyze/attributes.py. Rewritten with the other analysis
-- tables in one transaction. Aggregates only: no row names an image. Shares are 0-100 percent,
-- changes in percentage points, intervals at analysis.confidence; occupation '*' = all
-- occupations pooled; source = 'training' or the generated model's id. Migration 9, idempotent.

-- The distribution of one attribute in one image set.
CREATE TABLE IF NOT EXISTS attribute_distribution (
    attribute    VARCHAR NOT NULL,           -- age_bin | age_group | skin_tone | tone_group | monk | race
    source       VARCHAR NOT NULL,           -- training | <model_id>
    strategy     VARCHAR,                    -- training selection strategy (NULL: generated)
    occupation   VARCHAR NOT NULL,
    class        VARCHAR NOT NULL,           -- e.g. 25_34, l_45_60, l_dark
    class_order  INTEGER NOT NULL,           -- position of the class on its scale (0-based)
    n            INTEGER NOT NULL,           -- measured adult faces of the set
    count        INTEGER NOT NULL,           -- of them, in this class
    share        DOUBLE,                     -- 100 x count / n
    share_low    DOUBLE,                     -- Wilson interval
    share_high   DOUBLE,
    corrected_share DOUBLE,                  -- corrected for the instrument's errors (NULL: not)
    corrected_low DOUBLE,
    corrected_high DOUBLE,
    calibrated   BOOLEAN NOT NULL,           -- skin tone: Monk from human labels; else L* bands
    note         VARCHAR                     -- why there is no corrected share
);

-- One attribute of one image set in numbers.
CREATE TABLE IF NOT EXISTS attribute_summary (
    attribute    VARCHAR NOT NULL,           -- age (expected age, years) | skin_tone (L*, 0-100)
    source       VARCHAR NOT NULL,
    strategy     VARCHAR,
    occupation   VARCHAR NOT NULL,
    n            INTEGER NOT NULL,           -- measured adult faces
    mean         DOUBLE,                     -- mean expected age (years) or mean L*
    mean_low     DOUBLE,                     -- normal interval of the mean
    mean_high    DOUBLE,
    median       DOUBLE,
    entropy_norm DOUBLE,                     -- entropy of the classes / ln K, 0-1
    entropy_norm_debiased DOUBLE,            -- Miller-Madow corrected, 0-1
    tv_uniform   DOUBLE,                     -- total variation to uniform over the classes, 0-1
    tv_uniform_debiased DOUBLE,              -- beyond a uniform sample of the same n (0 = chance)
    minors       INTEGER,                    -- faces read as under 16: counted apart, left out
    unmeasurable INTEGER,                    -- kept faces without a measurement (skin tone)
    calibrated   BOOLEAN NOT NULL
);

-- Per class: generated share minus training share, per (model, strategy, occupation).
CREATE TABLE IF NOT EXISTS attribute_change (
    attribute    VARCHAR NOT NULL,
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    class        VARCHAR NOT NULL,
    class_order  INTEGER NOT NULL,
    training_share DOUBLE,                   -- percent
    generated_share DOUBLE,
    change       DOUBLE,                     -- percentage points (generated - training)
    change_low   DOUBLE,                     -- Newcombe interval of the difference
    change_high  DOUBLE
);

-- Multi-class amplification per (model, strategy, occupation) and pooled ('*').
CREATE TABLE IF NOT EXISTS attribute_amplification (
    attribute    VARCHAR NOT NULL,
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    n_training   INTEGER NOT NULL,
    n_generated  INTEGER NOT NULL,
    a_k          DOUBLE,                     -- TV(g,u) - TV(t,u) at equal n, percentage points
    a_k_low      DOUBLE,
    a_k_high     DOUBLE,
    a_k_raw      DOUBLE,                     -- the same from the measured shares (biased by n)
    directional  DOUBLE,                     -- Wang & Russakovsky, occupation -> class (pooled rows)
    directional_low DOUBLE,
    directional_high DOUBLE,
    mean_shift   DOUBLE,                     -- generated - training mean (years or L*)
    mean_shift_low DOUBLE,
    mean_shift_high DOUBLE,
    emd          DOUBLE,                     -- earth mover's distance, in class steps
    emd_low      DOUBLE,
    emd_high     DOUBLE,
    entropy_change DOUBLE,                   -- generated - training normalised entropy (debiased)
    calibrated   BOOLEAN NOT NULL
);

-- The 18 cells perceived gender x tone group x age group, all occupations pooled.
CREATE TABLE IF NOT EXISTS attribute_intersections (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,           -- '*'
    gender       VARCHAR NOT NULL,
    tone_group   VARCHAR NOT NULL,
    age_group    VARCHAR NOT NULL,
    n_training   INTEGER NOT NULL,           -- faces with all three measured
    n_generated  INTEGER NOT NULL,
    training_share DOUBLE,
    generated_share DOUBLE,
    change       DOUBLE,                     -- percentage points
    change_low   DOUBLE,
    change_high  DOUBLE,
    p_value      DOUBLE,                     -- two-proportion z test
    q_value      DOUBLE,                     -- Benjamini-Hochberg over the model's 18 cells
    significant  BOOLEAN,                    -- q_value < 1 - analysis.confidence
    worst        BOOLEAN,                    -- the cell with the largest |change| of the model
    independence_p DOUBLE,                   -- errors independent? pairwise tests on validated faces, Bonferroni (NULL: untested)
    calibrated   BOOLEAN NOT NULL
);

-- Measured shares beside official statistics (self-identified, employed, 16+).
CREATE TABLE IF NOT EXISTS attribute_official (
    attribute    VARCHAR NOT NULL,           -- age_bin | age_group | median_age
    occupation   VARCHAR NOT NULL,
    class        VARCHAR NOT NULL,
    source       VARCHAR NOT NULL,           -- training | <model_id>
    strategy     VARCHAR,
    official_share DOUBLE,                   -- percent (median_age: years)
    measured_share DOUBLE,
    gap          DOUBLE,                     -- measured - official, percentage points (or years)
    official_table VARCHAR NOT NULL,         -- e.g. 'BLS CPS table 11b, 2025'
    caveat       VARCHAR NOT NULL
);

-- The instrument's errors per attribute and source from human validation labels.
CREATE TABLE IF NOT EXISTS attribute_errors (
    attribute    VARCHAR NOT NULL,
    source       VARCHAR NOT NULL,
    n_validated  INTEGER NOT NULL,
    matrix_json  VARCHAR,                    -- K x K P(predicted | true), JSON rows
    applied      BOOLEAN NOT NULL,
    reason       VARCHAR,
    tone_group   VARCHAR                     -- gender errors per tone group (NULL: all)
);
