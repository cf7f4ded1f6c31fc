-- Human preference and official statistics (METHODS §3; docs/preferences.md).
-- Owners: corpus_audit/analysis/category_stage.py (category_distribution) and
-- corpus_audit/preferences/study.py (battle_pairs, battles, preference_ratings, preference_pairs).
-- Percentages are 0-100, gaps in percentage points, ratings in Elo points.

-- Per model x prompt family x language x variant x category: shares of the labelled generated
-- images of the prompt-table prompts, against the official %female of the category
-- (columns as corpus_audit.analysis.categories.CATEGORY_COLUMNS). Rewritten by `categories`.
CREATE TABLE IF NOT EXISTS category_distribution (
    model_id     VARCHAR NOT NULL,
    prompt_set   VARCHAR,                    -- the prompt-table family: magbig | bafis | ...
    language     VARCHAR NOT NULL,
    variant      VARCHAR NOT NULL,
    category     VARCHAR NOT NULL,
    n_images     INTEGER NOT NULL,           -- labelled images: female + male + ambiguous
    n_female     INTEGER NOT NULL,
    n_male       INTEGER NOT NULL,
    n_ambiguous  INTEGER NOT NULL,
    pct_female DOUBLE, pct_female_low DOUBLE, pct_female_high DOUBLE,         -- of n_images
    pct_male DOUBLE, pct_male_low DOUBLE, pct_male_high DOUBLE,
    pct_ambiguous DOUBLE, pct_ambiguous_low DOUBLE, pct_ambiguous_high DOUBLE,
    percent_female DOUBLE,                   -- female / (female + male), Wilson interval below
    ci_low       DOUBLE,
    ci_high      DOUBLE,
    official_pf  DOUBLE,                     -- official %female of the category (NULL: none)
    official_source VARCHAR,
    official_year VARCHAR,
    official_country VARCHAR,
    official_basis VARCHAR,                  -- category | mean of k occupations | ...
    gap_pp       DOUBLE                      -- percent_female - official_pf
);

-- Every battle ever exported (`battles export`): the pair manifest. Kept across exports, so
-- the votes of an earlier page can still be imported; pair_id depends on the two images only.
CREATE TABLE IF NOT EXISTS battle_pairs (
    pair_id      VARCHAR PRIMARY KEY,
    prompt_id    VARCHAR NOT NULL,
    prompt_text  VARCHAR,
    model_a      VARCHAR NOT NULL,
    model_b      VARCHAR NOT NULL,
    image_a      VARCHAR NOT NULL,
    image_b      VARCHAR NOT NULL,
    path_a       VARCHAR NOT NULL,
    path_b       VARCHAR NOT NULL,
    exported_at  TIMESTAMP NOT NULL
);

-- Human votes (`battles import`): vote 0 = A wins, 1 = B wins, 2 = tie (METHODS §3). One row per
-- (pair, aspect, annotator); a vote imported again for the same key replaces the stored one.
CREATE TABLE IF NOT EXISTS battles (
    pair_id      VARCHAR NOT NULL,
    prompt_id    VARCHAR NOT NULL,
    model_a      VARCHAR NOT NULL,
    model_b      VARCHAR NOT NULL,
    image_a      VARCHAR NOT NULL,
    image_b      VARCHAR NOT NULL,
    aspect       VARCHAR NOT NULL,           -- bias | image_quality | prompt_alignment
    vote         INTEGER NOT NULL,
    annotator    VARCHAR NOT NULL,
    source_file  VARCHAR NOT NULL,
    line         INTEGER NOT NULL,           -- line of the vote in source_file
    PRIMARY KEY (pair_id, aspect, annotator)
);

-- Ratings per aspect and model from all battles (corpus_audit.preferences.elo.RATING_COLUMNS).
CREATE TABLE IF NOT EXISTS preference_ratings (
    aspect       VARCHAR NOT NULL,
    model_id     VARCHAR NOT NULL,
    n_battles    INTEGER NOT NULL,
    elo          DOUBLE,                     -- in the order the battles were imported
    elo_median   DOUBLE,                     -- over `rounds` shuffled orders
    elo_ci_low   DOUBLE,
    elo_ci_high  DOUBLE,
    bt_rating    DOUBLE,                     -- Bradley-Terry maximum likelihood, Elo scale
    bt_ci_low    DOUBLE,
    bt_ci_high   DOUBLE,
    rank         INTEGER,                    -- 1 = highest Elo median
    rounds       INTEGER,
    method       VARCHAR
);

-- Battles, wins, losses, ties per aspect and ordered model pair (elo.PAIR_MATRIX_COLUMNS).
CREATE TABLE IF NOT EXISTS preference_pairs (
    aspect       VARCHAR NOT NULL,
    model_id     VARCHAR NOT NULL,
    opponent     VARCHAR NOT NULL,
    battles      INTEGER NOT NULL,
    wins         INTEGER NOT NULL,
    losses       INTEGER NOT NULL,
    ties         INTEGER NOT NULL,
    win_rate     DOUBLE,                     -- wins / (wins + losses)
    score        DOUBLE                      -- (wins + ties / 2) / battles
);
