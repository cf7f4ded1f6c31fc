-- neighbors, per occupation: its prompts with the place of their vectors.
SELECT p.prompt_id, e.path, e."row"
FROM prompts p
JOIN prompt_embeddings e ON e.prompt_id = p.prompt_id AND e.model_id = $model
WHERE p.occupation = $occupation
ORDER BY p.template_id, p.prompt_id;
