-- Replace the `no_indicators` rows of `samples` (the rows the indicators stage owns) with the
-- temp table indicators_sample_new (indicators/sample_fresh.sql or indicators/sample_split.sql).
-- Run inside the caller's transaction. Owner: corpus_audit/stages/indicators/__init__.py
DELETE FROM samples WHERE strategy = 'no_indicators';
INSERT INTO samples (strategy, occupation, prompt_id, caption_id, rank, score)
SELECT strategy, occupation, prompt_id, caption_id, rank, score FROM indicators_sample_new;
