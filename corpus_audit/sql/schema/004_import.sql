-- Images made elsewhere and imported into a study (`corpus-audit import-images`; docs/generate.md,
-- "Auditing DALL-E 3, Midjourney or any model"). Owner: corpus_audit/commands/import_images.py.
-- Migration 4. Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.
-- Each imported image is also an `images` row (source = 'generated', origin = 'import:<import_id>'),
-- so label, analyze, the PST stages, categories, battles and the report treat it like a
-- generated one.

-- One row per `import-images` run and source (a manifest, a folder, a BAFIS metadata.json).
CREATE TABLE IF NOT EXISTS image_imports (
    import_id    VARCHAR PRIMARY KEY,        -- 16 hex digits, one per run and source
    source_path  VARCHAR NOT NULL,           -- the manifest / metadata.json / folder, absolute
    layout       VARCHAR NOT NULL,           -- csv | jsonl | folder | bafis
    source_sha256 VARCHAR NOT NULL,          -- of the manifest's bytes (folder: of its sorted listing)
    model_override VARCHAR,                  -- --model, when given
    imported_at  TIMESTAMP NOT NULL,         -- UTC
    n_items      INTEGER NOT NULL,           -- entries read from the source
    n_added      INTEGER NOT NULL,           -- new images rows
    n_present    INTEGER NOT NULL,           -- already imported with the same bytes: nothing added
    n_dropped    INTEGER NOT NULL,           -- missing, unreadable, not an image, changed (import_skips)
    versions     VARCHAR NOT NULL            -- JSON: corpus_audit and Pillow versions
);

-- One row per imported image: where its bytes are and what they were when imported.
CREATE TABLE IF NOT EXISTS imported_images (
    image_id     VARCHAR PRIMARY KEY,        -- 'imp:<model-slug>:<prompt_id>:<index>:<sha256[:16]>'
    import_id    VARCHAR NOT NULL,           -- the run that added it
    file         VARCHAR NOT NULL,           -- absolute path of the file (images.path too)
    sha256       VARCHAR NOT NULL,           -- of the file's bytes at import
    n_bytes      BIGINT NOT NULL,
    width        INTEGER,
    height       INTEGER,
    source_line  INTEGER,                    -- line of the manifest (folder: NULL)
    image_index  INTEGER NOT NULL,           -- 0-based within (model, prompt): the `index` column or the order read
    metadata     VARCHAR                     -- JSON: the source's other columns / fields
);

-- Entries of a source that were not imported, with the reason: missing_file | unreadable |
-- not_an_image | changed_since_import (bytes differ from the imported file at that path).
CREATE TABLE IF NOT EXISTS import_skips (
    import_id    VARCHAR NOT NULL,
    source_path  VARCHAR NOT NULL,
    source_line  INTEGER,
    file         VARCHAR NOT NULL,
    reason       VARCHAR NOT NULL,
    detail       VARCHAR
);
