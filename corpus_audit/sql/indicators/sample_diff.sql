-- How many rows the new `no_indicators` sample and the stored one differ by (0: unchanged).
-- Reads the temp table indicators_sample_new (indicators/sample_fresh.sql or
-- indicators/sample_split.sql) and `samples`. Owner: corpus_audit/stages/indicators/__init__.py
SELECT count(*) FROM (
    (SELECT strategy, occupation, prompt_id, caption_id, rank, score FROM indicators_sample_new
     EXCEPT ALL
     SELECT strategy, occupation, prompt_id, caption_id, rank, score FROM samples
     WHERE strategy = 'no_indicators')
    UNION ALL
    (SELECT strategy, occupation, prompt_id, caption_id, rank, score FROM samples
     WHERE strategy = 'no_indicators'
     EXCEPT ALL
     SELECT strategy, occupation, prompt_id, caption_id, rank, score FROM indicators_sample_new)
);
