-- The latest finished run of stage $stage (Study.last_run). Reads `stage_runs`.
-- Owner: corpus_audit/core/store.py
SELECT *
FROM stage_runs
WHERE stage = $stage
ORDER BY finished_at DESC, started_at DESC
LIMIT 1;
