-- PST report: per prompt kind, generated images, how many `label` filtered, and the PST face
-- rule's outcome (kept, and each drop reason).
SELECT p.kind,
       count(DISTINCT i.image_id) AS generated,
       count(DISTINCT q.image_id) AS filtered,
       count(DISTINCT q.image_id) FILTER (WHERE q.kept) AS kept,
       count(DISTINCT q.image_id) FILTER (WHERE q.reason = 'no_face') AS no_face,
       count(DISTINCT q.image_id) FILTER (WHERE q.reason = 'one_face') AS one_face,
       count(DISTINCT q.image_id) FILTER (WHERE q.reason = 'small_face') AS small_face,
       count(DISTINCT q.image_id) FILTER (WHERE q.reason = 'many_faces') AS many_faces,
       count(DISTINCT q.image_id) FILTER (WHERE q.reason = 'unreadable') AS unreadable
FROM pst_prompts p
JOIN images i ON i.prompt_id = p.prompt_id
LEFT JOIN pst_face_filter q ON q.image_id = i.image_id
GROUP BY p.kind
ORDER BY p.kind
