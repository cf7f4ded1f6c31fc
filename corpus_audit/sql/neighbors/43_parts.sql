-- The embedding cache parts (.npy paths) that hold a vector of this study for embedder $model.
-- Reads `caption_embeddings`, `prompt_embeddings`. Owner: corpus_audit/stages/neighbors.py
SELECT DISTINCT path FROM caption_embeddings WHERE model_id = $model
UNION
SELECT DISTINCT path FROM prompt_embeddings WHERE model_id = $model
ORDER BY 1;
