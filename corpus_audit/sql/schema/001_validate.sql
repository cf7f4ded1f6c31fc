-- Tables of `corpus-audit validate` (human labels; not a stage). Owner: corpus_audit/commands/validate.py
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

-- Human validation labels (validate import).
CREATE TABLE IF NOT EXISTS human_labels (
    image_id     VARCHAR NOT NULL,
    annotator    VARCHAR NOT NULL,
    label        VARCHAR NOT NULL,           -- male | female | unsure
    source_file  VARCHAR                     -- the CSV it came from (a re-import replaces the annotator)
);

-- The sample of the latest `validate export` (item numbers as on the sheet).
CREATE TABLE IF NOT EXISTS validation_items (
    item         INTEGER NOT NULL,           -- 1-based, as printed on the sheet
    image_id     VARCHAR NOT NULL,
    classifier   VARCHAR NOT NULL,           -- whose labels the sample was stratified by
    stratum      VARCHAR NOT NULL            -- '<source>/<label>'
);
