-- Bookkeeping of the indicators stage (tables `indicators` and `indicator_triggers` are in
-- schema_00_core.sql).

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
