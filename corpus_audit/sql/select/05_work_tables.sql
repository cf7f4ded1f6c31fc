-- select, step 1: scratch tables of one run (TEMP: never stored in study.duckdb).
-- _select_forms: every lexicon surface form (lower case, single spaces) and its occupation.
-- _select_candidates: corpus rows whose caption matched the occupation regex.
CREATE OR REPLACE TEMP TABLE _select_forms (
    form        VARCHAR PRIMARY KEY,
    occupation  VARCHAR NOT NULL
);
CREATE OR REPLACE TEMP TABLE _select_candidates (
    caption_id   BIGINT NOT NULL,          -- (file_id << 40) | row_in_file
    file_id      INTEGER NOT NULL,
    row_in_file  BIGINT NOT NULL,
    text         VARCHAR NOT NULL,
    url          VARCHAR,
    key          VARCHAR                   -- value of corpus.key_column, if configured
);
