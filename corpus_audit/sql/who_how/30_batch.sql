-- One association batch: the texts with ids in [$lo, $hi] that have no association yet.
SELECT t.text_id, t.text
FROM texts_text t
WHERE t.text_id BETWEEN $lo AND $hi
  AND NOT EXISTS (SELECT 1 FROM texts_associations a WHERE a.text_id = t.text_id)
ORDER BY t.text_id;
