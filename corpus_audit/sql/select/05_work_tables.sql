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
-- _select_found: every match (caption, its place pos = 1, 2, ... in the caption, the lower-cased
-- match, its form and occupation); filled by 15_matched (hyperscan) or 20_found (duckdb).
CREATE OR REPLACE TEMP TABLE _select_found (
    caption_id  BIGINT NOT NULL,
    pos         BIGINT NOT NULL,
    norm        VARCHAR,
    form        VARCHAR,
    occupation  VARCHAR
);
