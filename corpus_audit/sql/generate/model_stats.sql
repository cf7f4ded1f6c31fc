-- After a model's run of `generate`: its generated images, how many the safety checker
-- flagged, and how many distinct prompts the text encoder truncated ($model: the model id).
-- Reads `images`, `generated_images`. Owner: corpus_audit/stages/generate.py
SELECT count(*),
       count(*) FILTER (WHERE i.nsfw),
       count(DISTINCT g.prompt_key) FILTER (WHERE g.truncated)
FROM images i
LEFT JOIN generated_images g USING (image_id)
WHERE i.source = 'generated' AND i.model_id = $model;
