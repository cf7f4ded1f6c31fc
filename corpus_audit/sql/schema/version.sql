-- The schema migrations a study has had (corpus_audit/core/store.py, Study.migrate). Created by the
-- first migration a study gets; a study without it is version 0 (made before it existed).
CREATE TABLE IF NOT EXISTS schema_version (
    version      INTEGER PRIMARY KEY,        -- the migration, 1, 2, ... (schema_<NNN>_*.sql)
    files        VARCHAR NOT NULL,           -- the files it ran, comma-separated
    applied_at   TIMESTAMP NOT NULL          -- UTC
);
