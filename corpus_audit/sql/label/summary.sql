-- The `label` stage's summary per image source: images, kept by the face filter, labels of
-- $classifier by value and face-filter drops by reason.
-- Reads `images`, `face_filter`, `labels`. Owner: corpus_audit/stages/label/__init__.py
SELECT i.source,
       count(*) AS images,
       count(*) FILTER (WHERE f.kept) AS faces_kept,
       count(*) FILTER (WHERE l.label = 'female') AS female,
       count(*) FILTER (WHERE l.label = 'male') AS male,
       count(*) FILTER (WHERE l.label = 'ambiguous') AS ambiguous,
       count(*) FILTER (WHERE f.reason = 'no_face') AS no_face,
       count(*) FILTER (WHERE f.reason = 'many_faces') AS many_faces,
       count(*) FILTER (WHERE f.reason = 'small_face') AS small_face,
       count(*) FILTER (WHERE f.reason = 'unreadable') AS unreadable
FROM images i
LEFT JOIN face_filter f USING (image_id)
LEFT JOIN labels l ON l.image_id = i.image_id AND l.classifier = $classifier
GROUP BY i.source
ORDER BY i.source;
