-- The latest run of stage $stage that did its work (status 'done', not 'skipped'):
-- `status` shows its counts when later reruns found nothing to do (Study.last_done_run).
-- Reads `stage_runs`. Owner: corpus_audit/core/store.py
SELECT *
FROM stage_runs
WHERE stage = $stage AND status = 'done'
ORDER BY finished_at DESC, started_at DESC
LIMIT 1;
