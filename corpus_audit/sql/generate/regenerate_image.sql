-- What regenerates one generated image ($image_id): model, prompt text, seed, the recorded
-- settings (JSON) and its place in the original batch.
-- Reads `images`, `generated_images`, `generation_settings`. Owner: corpus_audit/stages/generate.py
SELECT i.model_id, i.prompt_text, i.seed, s.details, g.batch_id, g.batch_pos
FROM images i
JOIN generated_images g USING (image_id)
JOIN generation_settings s USING (settings_id)
WHERE i.image_id = $image_id;
