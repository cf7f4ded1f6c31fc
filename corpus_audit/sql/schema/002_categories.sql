-- Human preference and official statistics (METHODS §3; docs/preferences.md).
-- Owners: corpus_audit/stages/categories.py (category_distribution) and
-- corpus_audit/commands/battles.py (battle_pairs, battles, preference_ratings, preference_pairs).
-- Percentages are 0-100, gaps in percentage points, ratings in Elo points.

-- Per model x prompt family x language x variant x category: shares of the labelled generated
-- images of the prompt-table prompts, against the official %female of the category
-- (columns as corpus_audit.methods.categories.CATEGORY_COLUMNS). Rewritten by `categories`.
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
