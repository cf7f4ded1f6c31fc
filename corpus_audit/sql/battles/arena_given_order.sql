-- The stored arena votes in the Elo's given order: by timestamp (votes without one last), then
-- by file and record, as imported.
SELECT aspect, language, model_a, model_b, vote, outcome, created_at, source_file, record
FROM arena_votes
ORDER BY created_at NULLS LAST, source_file, record, aspect;
