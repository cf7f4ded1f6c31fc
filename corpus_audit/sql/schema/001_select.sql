-- Tables of the `select` stage. Owner: corpus_audit/stages/select/. `samples` is written by three
-- stages, each owning its strategies' rows (stages.py `owns`): select keyword, indicators
-- no_indicators, neighbors nn and nn_no_indicators.
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

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

-- Prompts of the study's prompt sets (templates x occupations), written by `select`.
CREATE TABLE IF NOT EXISTS prompts (
    prompt_id    VARCHAR PRIMARY KEY,        -- '<set>:<template_id>:<occupation>'
    prompt_set   VARCHAR NOT NULL,
    template_id  INTEGER NOT NULL,           -- 1-based, as in the paper (#1-#4)
    occupation   VARCHAR NOT NULL,
    text         VARCHAR NOT NULL
);
