-- neighbors, step 1: every distinct text the stage needs a vector for: each caption in
-- `mentions` (all keyword captions, not only the sampled ones) and each prompt.
-- key = md5 of the exact UTF-8 text: the cache key (corpus_audit/backends/embeddings.py:text_key).
CREATE OR REPLACE TEMP TABLE _nb_texts AS
SELECT md5(text) AS key, any_value(text) AS text
FROM (
    SELECT c.text FROM captions c
    WHERE c.caption_id IN (SELECT caption_id FROM mentions)
    UNION ALL
    SELECT text FROM prompts
)
GROUP BY md5(text);
