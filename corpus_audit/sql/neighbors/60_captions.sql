-- neighbors, per occupation: its captions (distinct, by caption_id) with the place of their
-- vectors and their indicator label ('' when the indicators stage left one unlabelled).
SELECT m.caption_id, e.path, e."row", coalesce(i.label, '') AS label
FROM (SELECT DISTINCT caption_id FROM mentions WHERE occupation = $occupation) m
JOIN caption_embeddings e ON e.caption_id = m.caption_id AND e.model_id = $model
LEFT JOIN indicators i ON i.caption_id = m.caption_id
ORDER BY m.caption_id;
