-- %female inputs per training subset: each (strategy, occupation, prompt_id) group of
-- `samples`, its registered training images, and how many of them are labelled female / male.
-- prompt_id (and so template_id) is NULL for per-occupation strategies (keyword,
-- no_indicators). A subset whose captions have no image yet has n_images = 0.
SELECT
    s.strategy,
    s.occupation,
    s.prompt_id,
    p.template_id,
    count(DISTINCT i.image_id) AS n_images,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'female') AS n_female,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'male') AS n_male
FROM samples s
LEFT JOIN prompts p ON p.prompt_id = s.prompt_id
LEFT JOIN images i ON i.source = 'training' AND i.caption_id = s.caption_id
LEFT JOIN analysis_labelled a ON a.image_id = i.image_id
GROUP BY s.strategy, s.occupation, s.prompt_id, p.template_id
ORDER BY s.strategy, s.occupation, p.template_id NULLS FIRST;
