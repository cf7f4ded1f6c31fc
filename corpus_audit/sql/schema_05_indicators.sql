-- Bookkeeping of the indicators stage (tables `indicators` and `indicator_triggers` are in
-- schema_00_core.sql). One row: the settings the stored labels were made with. When the
-- gender-terms lexicon, the spaCy model (name or version), the NER components, use_names or
-- gender-guesser's version change, the stage relabels every caption.
CREATE TABLE IF NOT EXISTS indicator_settings (
    fingerprint  VARCHAR NOT NULL,           -- sha256 of `settings`, first 16 hex digits
    settings     VARCHAR NOT NULL            -- JSON: terms, spaCy model + version, pipes, ...
);
