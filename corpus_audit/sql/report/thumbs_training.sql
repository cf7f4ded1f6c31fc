-- Report: up to $n training images of the captions sampled for $occupation (any strategy),
-- labelled ones first, in a fixed pseudo-random order; label = the $classifier label, else
-- the face filter's reason, else 'unlabelled'.
-- Reads `images`, `samples`, `captions`, `labels`, `face_filter`. Owner: corpus_audit/report/context.py
SELECT i.image_id, i.path, coalesce(l.label, f.reason, 'unlabelled') AS label,
       c.text AS title
FROM images i
JOIN (SELECT DISTINCT caption_id FROM samples WHERE occupation = $occupation) s USING (caption_id)
LEFT JOIN captions c USING (caption_id)
LEFT JOIN labels l ON l.image_id = i.image_id AND l.classifier = $classifier
LEFT JOIN face_filter f ON f.image_id = i.image_id
WHERE i.source = 'training'
ORDER BY l.label IS NULL, hash(i.image_id)
LIMIT $n;
