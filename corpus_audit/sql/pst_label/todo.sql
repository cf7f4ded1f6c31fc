-- Generated images of PST prompts that `pst_label` still has to work on: filtered by `label`
-- (a face_filter row) and without a pst_face_filter row, or kept there without a person row
-- from the configured classifier ($cid). Columns are what corpus_audit/stages/pst_label.py reads.
SELECT i.image_id, i.path, i.prompt_id, p.kind,
       f.n_faces, f.kept AS one_face_kept, f.reason AS one_face_reason, f.kept_face,
       f.image_width, f.image_height
FROM images i
JOIN pst_prompts p ON p.prompt_id = i.prompt_id
JOIN face_filter f ON f.image_id = i.image_id
LEFT JOIN pst_face_filter q ON q.image_id = i.image_id
WHERE i.source = 'generated'
  AND (q.image_id IS NULL
       OR (q.kept AND NOT EXISTS (
               SELECT 1 FROM pst_people pp
               WHERE pp.image_id = i.image_id AND pp.classifier = $cid)))
ORDER BY i.image_id
