-- Images to work on: not filtered yet, kept without a label of $classifier, or (label.age /
-- label.skin_tone on) kept without a perceived_age / skin_tone row, or dropped for their faces
-- without a skin_tone row (its image_l_star). needs_age / needs_skin: which rows it lacks.
-- Owner: corpus_audit/stages/label/__init__.py
SELECT i.image_id, i.path, f.image_id IS NOT NULL AS filtered, f.kept_face,
       fa.x, fa.y, fa.w, fa.h, fa.score, fa.image_width, l.image_id IS NOT NULL AS labelled,
       $age AND pa.image_id IS NULL AS needs_age, $skin AND st.image_id IS NULL AS needs_skin,
       f.reason
FROM images i
LEFT JOIN face_filter f USING (image_id)
LEFT JOIN labels l ON l.image_id = i.image_id AND l.classifier = $classifier
LEFT JOIN faces fa ON fa.image_id = i.image_id AND fa.face_index = f.kept_face
LEFT JOIN perceived_age pa ON pa.image_id = i.image_id AND pa.model = $age_model
LEFT JOIN skin_tone st ON st.image_id = i.image_id AND st.method = $skin_method
WHERE f.image_id IS NULL OR (f.kept AND l.image_id IS NULL)
   OR ($age AND f.kept AND pa.image_id IS NULL)
   OR ($skin AND st.image_id IS NULL AND (f.kept OR list_contains($dropped_reasons, f.reason)))
ORDER BY i.image_id;
