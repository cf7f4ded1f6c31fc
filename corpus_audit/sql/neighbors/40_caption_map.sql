-- neighbors, step 4: caption_embeddings for model $model = where each caption's vector lives.
-- Incremental: rows of captions no longer in `mentions` (or whose text changed) go, new ones
-- come; unchanged rows stay as they are.
DELETE FROM caption_embeddings e
WHERE e.model_id = $model
  AND NOT EXISTS (
      SELECT 1 FROM captions c JOIN _nb_found f ON f.key = md5(c.text)
      WHERE c.caption_id = e.caption_id AND f.key = e.text_md5 AND f.path = e.path
        AND c.caption_id IN (SELECT caption_id FROM mentions)
  );
INSERT INTO caption_embeddings (model_id, caption_id, text_md5, path, "row")
SELECT $model, c.caption_id, f.key, f.path, f."row"
FROM captions c
JOIN _nb_found f ON f.key = md5(c.text)
WHERE c.caption_id IN (SELECT caption_id FROM mentions)
  AND c.caption_id NOT IN (SELECT caption_id FROM caption_embeddings WHERE model_id = $model);
