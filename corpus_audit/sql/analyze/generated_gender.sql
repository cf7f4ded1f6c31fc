-- Counts of the generated (and imported) images per (model, prompt) for `generated_gender`
-- (corpus_audit/stages/analyze/generated_gender.py). Needs the temp table analysis_labelled
-- (analyze/labelled.sql). Every image of a prompt of `prompts` counts: prompt-table prompts
-- (MAGBIG/BAFIS) too, with their language from prompt_categories (NULL for templated sets: the
-- caller fills the set's language). An image without a row in analysis_labelled (dropped by the
-- face filter, or not labelled by this classifier) counts as dropped.
SELECT
    coalesce(i.model_id, 'unknown') AS model_id,
    p.occupation,
    i.prompt_id,
    p.prompt_set,
    c.language,
    count(DISTINCT i.image_id) AS n_images,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'female') AS n_female,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'male') AS n_male,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'ambiguous') AS n_ambiguous,
    count(DISTINCT i.image_id) FILTER (WHERE a.image_id IS NULL) AS n_dropped
FROM images i
JOIN prompts p ON p.prompt_id = i.prompt_id
LEFT JOIN prompt_categories c ON c.prompt_id = i.prompt_id
LEFT JOIN analysis_labelled a ON a.image_id = i.image_id
WHERE i.source = 'generated'
GROUP BY ALL
ORDER BY model_id, occupation, prompt_id;
