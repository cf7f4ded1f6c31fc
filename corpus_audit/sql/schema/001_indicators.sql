-- Tables of the `indicators` stage. Owner: corpus_audit/stages/indicators/__init__.py (its sample rows go in
-- `samples`, schema/001_select.sql).
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

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

-- One row: the settings the stored labels were made with. When the gender-terms lexicon, the
-- spaCy model (name or version), the NER components, use_names or gender-guesser's version
-- change, the stage relabels every caption. select_fingerprint is the `select` run the text
-- check below last ran against.
CREATE TABLE IF NOT EXISTS indicator_settings (
    fingerprint         VARCHAR NOT NULL,    -- sha256 of `settings`, first 16 hex digits
    settings            VARCHAR NOT NULL,    -- JSON: terms, spaCy model + version, pipes, ...
    select_fingerprint  VARCHAR              -- provenance.fingerprint of that select run
);

-- The text each label was made from (md5), so that a caption whose text changed when
-- `select` was rerun on a changed corpus (caption ids are file index + row) is relabelled.
CREATE TABLE IF NOT EXISTS indicator_texts (
    caption_id   BIGINT PRIMARY KEY,
    text_md5     UHUGEINT NOT NULL           -- md5_number(captions.text)
);
