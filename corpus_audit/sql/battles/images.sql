-- battles export: the generated images that may be drawn into battles (one row per image with
-- a model and a prompt of the `prompts` table; caption-as-prompt images have no prompt_id and
-- are left out), with the prompt's text for the page. Paths are relative to the study.
SELECT
    i.image_id,
    i.model_id,
    i.prompt_id,
    i.path,
    p.text AS prompt_text
FROM images i
JOIN prompts p ON p.prompt_id = i.prompt_id
WHERE i.source = 'generated'
  AND i.model_id IS NOT NULL
  AND i.path IS NOT NULL
ORDER BY i.image_id;
