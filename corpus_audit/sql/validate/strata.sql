-- The images labelled by $classifier with their stratum '<source>/<label>' (validate export
-- draws its sample per stratum). Reads `labels`, `images`. Owner: corpus_audit/commands/validate.py
SELECT l.image_id, i.path, i.source || '/' || l.label AS stratum
FROM labels l
JOIN images i USING (image_id)
WHERE l.classifier = $classifier;
