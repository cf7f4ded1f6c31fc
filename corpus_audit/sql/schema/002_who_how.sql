-- Who is represented and how (METHODS 4; docs/who_vs_how.md): the tables of the `who_how`
-- stage, for the study's occupation captions (texts.source = 'captions') and for any text
-- corpus read by `corpus-audit texts FILE --out DIR` (texts.source = 'corpus'). A text is a
-- caption (text_id = caption_id) or a row of a corpus file (text_id = file_id << 40 | row).
-- `comparison` is 'associated' (texts associated with women vs men by the rule) or
-- 'specified' (texts whose gender is specified: the explicit indicator words and names of a
-- caption, the gender column of a corpus); `scope` is 'occupation' (one comparison per
-- occupation) or 'pooled' (every text once, occupation NULL).

-- The texts of a text corpus (texts.source = 'corpus'); empty for captions.
CREATE TABLE IF NOT EXISTS texts_documents (
    text_id      BIGINT PRIMARY KEY,
    source_file  VARCHAR NOT NULL,
    row_in_file  BIGINT NOT NULL,
    text         VARCHAR NOT NULL,
    specified    VARCHAR                     -- female | male | non_binary | NULL (gender column)
);

-- Each (text, occupation) of a text corpus: the occupation column, or the lexicon's mentions.
CREATE TABLE IF NOT EXISTS texts_occupations (
    text_id      BIGINT NOT NULL,
    occupation   VARCHAR NOT NULL
);

-- What the stored rows were made from: kind 'documents' (files and columns read),
-- 'associations' (the association terms), 'analysis' (inputs and settings of the tables below).
CREATE TABLE IF NOT EXISTS texts_settings (
    kind         VARCHAR PRIMARY KEY,
    fingerprint  VARCHAR NOT NULL,
    settings     VARCHAR NOT NULL            -- JSON
);

-- Gender association of every text (committed in batches; a rerun does only what is missing).
CREATE TABLE IF NOT EXISTS texts_associations (
    text_id            BIGINT PRIMARY KEY,
    text_md5           UHUGEINT NOT NULL,    -- md5_number of the text the counts were made from
    female_pronouns    INTEGER NOT NULL,
    male_pronouns      INTEGER NOT NULL,
    neutral_pronouns   INTEGER NOT NULL,
    female_honorifics  INTEGER NOT NULL,
    male_honorifics    INTEGER NOT NULL,
    non_binary_terms   INTEGER NOT NULL,
    association        VARCHAR NOT NULL      -- female | male | non_binary | none
);

-- Agreement of the association with the specified gender, per specified gender (distinct texts).
CREATE TABLE IF NOT EXISTS texts_agreement (
    specified_by              VARCHAR NOT NULL, -- indicators | indicator words | gender column
    gender                    VARCHAR NOT NULL,
    specified                 BIGINT NOT NULL,
    associated_same           BIGINT NOT NULL,
    associated_other          BIGINT NOT NULL,
    not_associated            BIGINT NOT NULL,
    agreement_pct             DOUBLE,         -- 0-100
    agreement_associated_pct  DOUBLE          -- 0-100, among the associated texts
);

-- Who: % women per occupation (labels 'association' or 'specified') vs labour statistics.
CREATE TABLE IF NOT EXISTS texts_who (
    labels           VARCHAR NOT NULL,
    occupation       VARCHAR NOT NULL,
    texts            BIGINT NOT NULL,
    female           BIGINT NOT NULL,
    male             BIGINT NOT NULL,
    non_binary       BIGINT NOT NULL,
    not_associated   BIGINT NOT NULL,
    associated       BIGINT NOT NULL,
    pct_women        DOUBLE,                 -- 0-100
    ci_low           DOUBLE,                 -- Wilson interval, percent
    ci_high          DOUBLE,
    labor_pct_women  DOUBLE,
    difference_pp    DOUBLE,
    labor_dominated  VARCHAR,                -- female | male | NULL (no statistic)
    decile           INTEGER                 -- 0-9
);

-- Occupations per decile of % women (texts.min_associated associated texts at least).
CREATE TABLE IF NOT EXISTS texts_deciles (
    labels            VARCHAR NOT NULL,
    decile            INTEGER NOT NULL,
    pct_low           DOUBLE NOT NULL,
    pct_high          DOUBLE NOT NULL,
    female_dominated  BIGINT NOT NULL,
    male_dominated    BIGINT NOT NULL,
    no_statistic      BIGINT NOT NULL,
    occupations       BIGINT NOT NULL
);

-- How: the calibrated marked words (Fightin' Words, |z| > texts.z_threshold).
CREATE TABLE IF NOT EXISTS texts_marked_words (
    comparison    VARCHAR NOT NULL,
    scope         VARCHAR NOT NULL,
    occupation    VARCHAR,
    side          VARCHAR NOT NULL,          -- female | male: the side the word marks
    rank          INTEGER NOT NULL,          -- 1 = largest |z| of its occupation and side
    word          VARCHAR NOT NULL,
    z             DOUBLE NOT NULL,           -- > 0: women's side
    log_odds      DOUBLE NOT NULL,
    count_female  BIGINT NOT NULL,
    count_male    BIGINT NOT NULL,
    texts_female  BIGINT NOT NULL,
    texts_male    BIGINT NOT NULL,
    examples      VARCHAR[],                 -- the first texts of its side with the word
    example_ids   BIGINT[]                   -- their text_id
);

-- One row per comparison: texts and words counted, significant and removed by calibration.
CREATE TABLE IF NOT EXISTS texts_marked_summary (
    comparison              VARCHAR NOT NULL,
    scope                   VARCHAR NOT NULL,
    occupation              VARCHAR,
    texts_female            BIGINT NOT NULL,
    texts_male              BIGINT NOT NULL,
    tokens_female           BIGINT NOT NULL,
    tokens_male             BIGINT NOT NULL,
    compared                BOOLEAN NOT NULL,
    words_compared          BIGINT NOT NULL,
    significant             BIGINT NOT NULL,
    removed_by_calibration  BIGINT NOT NULL,
    marked_female           BIGINT NOT NULL,
    marked_male             BIGINT NOT NULL,
    prior_strength          DOUBLE NOT NULL
);

-- The corpus words calibration removes (common English, the most frequent corpus words).
CREATE TABLE IF NOT EXISTS texts_calibration (
    comparison      VARCHAR NOT NULL,
    scope           VARCHAR NOT NULL,
    word            VARCHAR NOT NULL,
    corpus_count    BIGINT NOT NULL,
    zipf            DOUBLE,
    common_english  BOOLEAN NOT NULL,
    corpus_top      BOOLEAN NOT NULL
);

-- SRBS of the associated texts' marked words against the specified texts' marked words.
CREATE TABLE IF NOT EXISTS texts_srbs (
    scope           VARCHAR NOT NULL,
    occupation      VARCHAR,
    side            VARCHAR NOT NULL,        -- the associated side whose marked words are C
    words           BIGINT NOT NULL,
    targets_female  BIGINT NOT NULL,
    targets_male    BIGINT NOT NULL,
    s_female        DOUBLE,                  -- S(C, T_f), 0-2
    s_male          DOUBLE,                  -- S(C, T_m), 0-2
    srbs            DOUBLE                   -- S(C, T_f) - S(C, T_m), -2..2
);

-- Welch's t-test of SRBS, women's vs men's: over occupations, and over the pooled words.
CREATE TABLE IF NOT EXISTS texts_srbs_tests (
    scope        VARCHAR NOT NULL,
    unit         VARCHAR NOT NULL,           -- occupation | word
    n_female     BIGINT NOT NULL,
    n_male       BIGINT NOT NULL,
    mean_female  DOUBLE,
    mean_male    DOUBLE,
    t            DOUBLE,
    df           DOUBLE,
    p            DOUBLE
);
