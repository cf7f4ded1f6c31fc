-- neighbors, step 4b: prompt_embeddings for model $model (few rows: rebuilt each run).
DELETE FROM prompt_embeddings WHERE model_id = $model;
INSERT INTO prompt_embeddings (model_id, prompt_id, text_md5, path, "row")
SELECT $model, p.prompt_id, f.key, f.path, f."row"
FROM prompts p JOIN _nb_found f ON f.key = md5(p.text);
