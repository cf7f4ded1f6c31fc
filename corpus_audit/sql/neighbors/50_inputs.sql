-- neighbors, step 5: per occupation (from the prompts and from `mentions`) what its NN
-- selection and its diagnostics depend on, folded into one signature: each caption's id, the
-- md5 of its text and its indicator label; the keyword and no_indicators samples (strategy,
-- rank, caption id); the prompts; and $config (settings + embedder fingerprint). Each part is
-- the md5 of its items written out and sorted, so the signature changes whenever any item
-- does (an XOR of ids, used before, cancelled out when a re-select moved every id by the same
-- bit). md5, not hash(), whose values may change between DuckDB versions. An occupation whose
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
           md5(string_agg(
               m.caption_id::VARCHAR || ':' || coalesce(e.text_md5, '-') || ':'
                   || coalesce(i.label, '-'),
               ',' ORDER BY m.caption_id)) AS captions_md5
    FROM (SELECT DISTINCT occupation, caption_id FROM mentions) m
    LEFT JOIN indicators i ON i.caption_id = m.caption_id
    LEFT JOIN caption_embeddings e ON e.caption_id = m.caption_id AND e.model_id = $model
    GROUP BY m.occupation
), samp AS (
    SELECT occupation,
           md5(string_agg(
               strategy || ':' || rank::VARCHAR || ':' || caption_id::VARCHAR,
               ',' ORDER BY strategy, rank, caption_id)) AS samples_md5
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
           coalesce(c.n_captions, 0)::VARCHAR, coalesce(c.captions_md5, '-'),
           coalesce(s.samples_md5, '-'), coalesce(p.prompts_md5, '-'))) AS signature
FROM occs o
LEFT JOIN caps c USING (occupation)
LEFT JOIN samp s USING (occupation)
LEFT JOIN prm p USING (occupation)
ORDER BY o.occupation;
