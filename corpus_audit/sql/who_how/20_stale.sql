-- Associations whose text left the inputs or changed (select rerun on a changed corpus,
-- a corpus file edited): removed, so the stage counts them again.
DELETE FROM texts_associations a
WHERE NOT EXISTS (
    SELECT 1 FROM texts_text t
    WHERE t.text_id = a.text_id AND md5_number(t.text) = a.text_md5
);
