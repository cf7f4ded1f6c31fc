-- categories stage: one row per labelled generated image of a prompt-table prompt, with the
-- prompt's family, language, variant and category (needs the temp table analysis_labelled,
-- analyze/labelled.sql: the classifier's label of every image the face filter kept).
SELECT
    i.image_id,
    i.model_id,
    c.family AS prompt_set,
    c.language,
    c.variant,
    c.category,
    p.occupation,
    l.label
FROM images i
JOIN prompt_categories c ON c.prompt_id = i.prompt_id
JOIN prompts p ON p.prompt_id = i.prompt_id
JOIN analysis_labelled l ON l.image_id = i.image_id
WHERE i.source = 'generated'
ORDER BY i.image_id;
