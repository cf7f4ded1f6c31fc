-- Every classifier id in `labels` and CLIP model of `image_similarity` (the analysis checks
-- which of them name untrained weights). Owner: corpus_audit/stages/analyze/__init__.py
SELECT DISTINCT classifier FROM labels
UNION
SELECT DISTINCT clip_model FROM image_similarity
ORDER BY 1;
