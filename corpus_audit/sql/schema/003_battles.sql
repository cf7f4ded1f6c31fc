-- Votes collected by another arena (`corpus-audit battles import DIR FILE.json`: the BAFIS
-- arena's JSON, LMSYS-style battle files; corpus_audit/methods/preferences/arena_import.py) and the
-- leaderboard computed from them (corpus_audit/methods/preferences/leaderboard.py). Beside `battles`,
-- which holds the votes of corpus_audit's own page on the study's images.

-- One row per answered vote. Identity: the record's canonical JSON hash, its occurrence among
-- identical records of its file, the aspect; importing the same records again adds nothing.
CREATE TABLE IF NOT EXISTS arena_votes (
    record_sha256  VARCHAR NOT NULL,
    occurrence     INTEGER NOT NULL,
    aspect         VARCHAR NOT NULL,         -- bias | image_quality | prompt_alignment | overall
    format         VARCHAR NOT NULL,         -- bafis | lmsys
    source_file    VARCHAR NOT NULL,         -- as given at the first import
    file_sha256    VARCHAR NOT NULL,
    record         INTEGER NOT NULL,         -- 1-based position (JSON list) or line (JSON Lines)
    model_a        VARCHAR NOT NULL,
    model_b        VARCHAR NOT NULL,
    language       VARCHAR,
    prompt         VARCHAR,
    vote           INTEGER NOT NULL,         -- 0 A, 1 B, 2 tie, 3 tie (bothbad)
    outcome        VARCHAR NOT NULL,         -- model_a | model_b | tie | tie (bothbad)
    created_at     TIMESTAMP,                -- UTC; the Elo's given order
    updated_at     TIMESTAMP,
    imported_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (record_sha256, occurrence, aspect)
);

-- Ratings per aspect x language (`all` = every language) and model
-- (corpus_audit.methods.preferences.leaderboard.LEADERBOARD_COLUMNS).
CREATE TABLE IF NOT EXISTS arena_ratings (
    aspect       VARCHAR NOT NULL,
    language     VARCHAR NOT NULL,
    model_id     VARCHAR NOT NULL,
    n_battles    INTEGER NOT NULL,
    elo          DOUBLE,                     -- in the given order (created_at, file, record)
    elo_median   DOUBLE,                     -- over `rounds` shuffled orders
    elo_ci_low   DOUBLE,
    elo_ci_high  DOUBLE,
    bt_rating    DOUBLE,                     -- Bradley-Terry maximum likelihood, Elo scale
    bt_ci_low    DOUBLE,                     -- percentile bootstrap over `rounds` resamples
    bt_ci_high   DOUBLE,
    rank         INTEGER,                    -- 1 + models whose BT interval lies wholly above
    rank_elo     INTEGER,                    -- the same over the Elo intervals
    rounds       INTEGER
);

-- Battles, wins, losses, ties per aspect x language and ordered model pair
-- (corpus_audit.methods.preferences.leaderboard.PAIR_COLUMNS).
CREATE TABLE IF NOT EXISTS arena_pairs (
    aspect        VARCHAR NOT NULL,
    language      VARCHAR NOT NULL,
    model_id      VARCHAR NOT NULL,
    opponent      VARCHAR NOT NULL,
    battles       INTEGER NOT NULL,
    wins          INTEGER NOT NULL,
    losses        INTEGER NOT NULL,
    ties          INTEGER NOT NULL,          -- both tie kinds
    ties_bothbad  INTEGER NOT NULL,          -- of which vote 3 / tie (bothbad)
    win_rate      DOUBLE,                    -- wins / (wins + losses)
    score         DOUBLE                     -- (wins + ties / 2) / battles
);
