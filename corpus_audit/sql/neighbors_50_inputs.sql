-- neighbors, step 5: per occupation (from the prompts and from `mentions`) what its NN
-- selection and its diagnostics depend on, folded into one signature: caption ids, their
-- texts (md5), which are labelled 'none', the keyword and no_indicators samples, the prompts
-- and $config (settings + embedder fingerprint). Aggregates are XORs/counts of integers
-- (no hash(), whose values may change between DuckDB versions). An occupation whose
-- signature equals the one in neighbors_progress is finished and skipped.
CREATE OR REPLACE TEMP TABLE _nb_inputs AS
WITH occs AS (
    SELECT occupation FROM prompts
    UNION
    SELECT occupation FROM mentions
), caps AS (
    SELECT m.occupation,
           count(*) AS n_captions,
           count(*) FILTER (WHERE i.label = 'none') AS n_none,
           count(*) FILTER (WHERE i.caption_id IS NULL) AS n_unlabelled,
           bit_xor(m.caption_id) AS x_ids,
           bit_xor(m.caption_id) FILTER (WHERE i.label = 'none') AS x_none,
           bit_xor(('0x' || left(e.text_md5, 15))::BIGINT) AS x_text
    FROM (SELECT DISTINCT occupation, caption_id FROM mentions) m
    LEFT JOIN indicators i ON i.caption_id = m.caption_id
    LEFT JOIN caption_embeddings e ON e.caption_id = m.caption_id AND e.model_id = $model
    GROUP BY m.occupation
), samp AS (
    SELECT occupation,
           count(*) FILTER (WHERE strategy = 'keyword') AS n_keyword,
           bit_xor(caption_id) FILTER (WHERE strategy = 'keyword') AS x_keyword,
           count(*) FILTER (WHERE strategy = 'no_indicators') AS n_noind,
           bit_xor(caption_id) FILTER (WHERE strategy = 'no_indicators') AS x_noind
    FROM samples
    WHERE strategy IN ('keyword', 'no_indicators')
    GROUP BY occupation
), prm AS (
    SELECT occupation, count(*) AS n_prompts,
           md5(string_agg(prompt_id || '=' || md5(text), ',' ORDER BY prompt_id)) AS prompts_md5
    FROM prompts
    GROUP BY occupation
)
SELECT o.occupation,
       coalesce(c.n_captions, 0) AS n_captions,
       coalesce(c.n_none, 0) AS n_none,
       coalesce(c.n_unlabelled, 0) AS n_unlabelled,
       coalesce(p.n_prompts, 0) AS n_prompts,
       md5(concat_ws('|', $config,
           coalesce(c.n_captions, 0)::VARCHAR, coalesce(c.x_ids, 0)::VARCHAR,
           coalesce(c.x_none, 0)::VARCHAR, coalesce(c.x_text, 0)::VARCHAR,
           coalesce(s.n_keyword, 0)::VARCHAR, coalesce(s.x_keyword, 0)::VARCHAR,
           coalesce(s.n_noind, 0)::VARCHAR, coalesce(s.x_noind, 0)::VARCHAR,
           coalesce(p.prompts_md5, '-'))) AS signature
FROM occs o
LEFT JOIN caps c USING (occupation)
LEFT JOIN samp s USING (occupation)
LEFT JOIN prm p USING (occupation)
ORDER BY o.occupation;
