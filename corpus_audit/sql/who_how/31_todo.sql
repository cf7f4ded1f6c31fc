-- The input texts without a stored association, in id order (the association batches).
SELECT text_id
FROM texts_text t
WHERE NOT EXISTS (SELECT 1 FROM texts_associations a WHERE a.text_id = t.text_id)
ORDER BY text_id;
