-- Images of the CLIP image-image similarity diagnostic (METHODS 1.5 diagnostics), one row per
-- (set, image): the labelled (female/male) images behind each T and G. Needs the temp tables
-- analysis_labelled and subset_members. Owner: corpus_audit/stages/analyze/image_similarity.py
--   side 'training':  a training subset after the cut (strategy, occupation, prompt_id NULL
--                     for per-occupation strategies);
--   side 'generated': a generated set of a prompt of `prompts` (model_id, occupation,
--                     prompt_id, template_id).
SELECT 'training' AS side, NULL::VARCHAR AS model_id, m.strategy, m.occupation, m.prompt_id,
       p.template_id, m.image_id, i.path
FROM subset_members m
JOIN images i ON i.image_id = m.image_id
LEFT JOIN prompts p ON p.prompt_id = m.prompt_id
WHERE m.member AND m.state IN ('female', 'male')
UNION ALL
SELECT 'generated', coalesce(i.model_id, 'unknown'), NULL, p.occupation, i.prompt_id,
       p.template_id, i.image_id, i.path
FROM images i
JOIN prompts p ON p.prompt_id = i.prompt_id
JOIN analysis_labelled a ON a.image_id = i.image_id
WHERE i.source = 'generated' AND a.label IN ('female', 'male')
ORDER BY side, image_id;
