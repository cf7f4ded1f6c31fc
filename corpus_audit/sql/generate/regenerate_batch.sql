-- The prompts and seeds of one original generation batch ($batch_id), in batch order (an
-- exact regeneration replays the whole batch). Reads `generated_images`, `images`.
-- Owner: corpus_audit/stages/generate.py
SELECT i.prompt_text, i.seed
FROM generated_images g
JOIN images i USING (image_id)
WHERE g.batch_id = $batch_id
ORDER BY g.batch_pos;
