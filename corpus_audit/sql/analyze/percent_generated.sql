-- %female inputs per generated set: images generated from a prompt of the `prompts` table,
-- grouped by (model, prompt). Images whose prompt_id is not in `prompts` have no template
-- and are counted separately by the caller (template_id NULL here). Prompts of prompt tables
-- (MAGBIG/BAFIS, a `prompt_categories` row) are left out: their template_id 1 is not the
-- paper's template #1, and the `categories` stage analyses them.
SELECT
    coalesce(i.model_id, 'unknown') AS model_id,
    coalesce(p.occupation, i.occupation) AS occupation,
    i.prompt_id,
    p.template_id,
    count(DISTINCT i.image_id) AS n_images,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'female') AS n_female,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'male') AS n_male
FROM images i
LEFT JOIN prompts p ON p.prompt_id = i.prompt_id
LEFT JOIN analysis_labelled a ON a.image_id = i.image_id
WHERE i.source = 'generated' AND i.prompt_id IS NOT NULL
  AND i.prompt_id NOT IN (SELECT prompt_id FROM prompt_categories)
GROUP BY ALL
ORDER BY model_id, occupation, template_id;
