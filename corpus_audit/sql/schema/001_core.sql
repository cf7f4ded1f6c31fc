-- Bookkeeping tables every stage uses (corpus_audit/core/store.py). Public interface: documented in
-- README.md ("The study database").
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

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
