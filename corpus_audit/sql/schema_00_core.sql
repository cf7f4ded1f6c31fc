-- Core tables of a study database. Public interface: documented in README.md ("The study database").

-- One row per finished stage run (status reads the latest per stage).
CREATE TABLE IF NOT EXISTS stage_runs (
    stage        VARCHAR NOT NULL,
    status       VARCHAR NOT NULL,          -- done | skipped
    started_at   TIMESTAMP,                 -- UTC
    finished_at  TIMESTAMP,                 -- UTC
    rows_in      BIGINT,
    rows_out     BIGINT,
    dropped      VARCHAR,                   -- JSON {reason: count}
    provenance   VARCHAR,                   -- JSON: config hash, seeds, model ids, versions
    config_hash  VARCHAR
);

-- One row per stage whose latest run began and did not finish: written when the run starts,
-- removed in the transaction that adds its stage_runs row, and also removed when the run fails
-- before committing anything. A row left here means the run was killed, or failed after
-- committing part of its work: the stage is partial (`status` says so, and the stages that
-- read its tables refuse them until it is rerun).
CREATE TABLE IF NOT EXISTS stage_unfinished (
    stage        VARCHAR PRIMARY KEY,
    started_at   TIMESTAMP                  -- UTC, when the unfinished run began
);

-- Corpus files read by `select`, one row each (file_id is the index in the sorted path list).
CREATE TABLE IF NOT EXISTS corpus_files (
    file_id        INTEGER PRIMARY KEY,
    path           VARCHAR NOT NULL,
    format         VARCHAR NOT NULL,         -- parquet | csv | jsonl | hf
    text_column    VARCHAR NOT NULL,
    url_column     VARCHAR,
    rows_total     BIGINT,
    rows_null_text BIGINT,                   -- null/empty captions: counted and skipped
    rows_bad_text  BIGINT,                   -- undecodable captions: counted and skipped
    sample_key     VARCHAR                   -- the file's part of the sample order key: its name,
                                             -- or the shortest path tail that tells it apart
);
ALTER TABLE corpus_files ADD COLUMN IF NOT EXISTS sample_key VARCHAR;

-- Captions that mention at least one occupation. caption_id = (file_id << 40) | row_in_file,
-- so it does not depend on the order files were given in.
CREATE TABLE IF NOT EXISTS captions (
    caption_id   BIGINT PRIMARY KEY,
    text         VARCHAR NOT NULL,
    url          VARCHAR,
    source_file  VARCHAR NOT NULL,
    row_in_file  BIGINT NOT NULL
);

-- Every (caption, occupation) mention; a caption naming two occupations has two rows.
CREATE TABLE IF NOT EXISTS mentions (
    caption_id    BIGINT NOT NULL,
    occupation    VARCHAR NOT NULL,
    matched_form  VARCHAR NOT NULL           -- the surface form found (lower case), e.g. 'teachers'
);

-- Training subsets per selection strategy. prompt_id is NULL for per-occupation strategies
-- (keyword, no_indicators) and set for per-prompt ones (nn, nn_no_indicators).
CREATE TABLE IF NOT EXISTS samples (
    strategy     VARCHAR NOT NULL,           -- keyword | no_indicators | nn | nn_no_indicators
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,
    caption_id   BIGINT NOT NULL,
    rank         INTEGER NOT NULL,           -- 1-based
    score        DOUBLE                      -- cosine similarity for nn strategies, else NULL
);

-- Explicit gender indicators per caption in `mentions` (METHODS 1.6).
CREATE TABLE IF NOT EXISTS indicators (
    caption_id   BIGINT PRIMARY KEY,
    label        VARCHAR NOT NULL,           -- male | female | both | none
    triggers     VARCHAR NOT NULL            -- human-readable, e.g. 'woman; his; name:John(male)'
);

-- One row per trigger token behind an indicator label.
CREATE TABLE IF NOT EXISTS indicator_triggers (
    caption_id   BIGINT NOT NULL,
    kind         VARCHAR NOT NULL,           -- word | pronoun | name
    token        VARCHAR NOT NULL,           -- as matched (lower case for words, as written for names)
    gender       VARCHAR NOT NULL,           -- male | female
    guess        VARCHAR                     -- gender-guesser's raw answer for names, else NULL
);

-- Prompts of the study's prompt sets (templates x occupations), written by `select`.
CREATE TABLE IF NOT EXISTS prompts (
    prompt_id    VARCHAR PRIMARY KEY,        -- '<set>:<template_id>:<occupation>'
    prompt_set   VARCHAR NOT NULL,
    template_id  INTEGER NOT NULL,           -- 1-based, as in the paper (#1-#4)
    occupation   VARCHAR NOT NULL,
    text         VARCHAR NOT NULL
);
