-- Images the face filter kept that lack a perceived_age row ($age) or a skin_tone row ($skin),
-- whatever model or method: what `status` names when `label` has attributes left to measure.
-- Reads `face_filter`, `perceived_age`, `skin_tone`. Owner: corpus_audit/stages/label/__init__.py
SELECT count(*) FILTER (WHERE $age AND pa.image_id IS NULL) AS age_missing,
       count(*) FILTER (WHERE $skin AND st.image_id IS NULL) AS skin_missing
FROM face_filter f
LEFT JOIN (SELECT DISTINCT image_id FROM perceived_age) pa USING (image_id)
LEFT JOIN (SELECT DISTINCT image_id FROM skin_tone) st USING (image_id)
WHERE f.kept;
