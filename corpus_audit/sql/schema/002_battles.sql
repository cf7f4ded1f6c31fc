-- Human preference battles (corpus-audit battles export/import; docs/preferences.md).
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

-- Ratings per aspect and model from all battles (corpus_audit.methods.preferences.elo.RATING_COLUMNS).
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
