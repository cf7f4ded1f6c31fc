-- The images labelled by $classifier with their stratum (validate export draws its sample per
-- stratum): '<source>/<label>', or with $by_attributes '<source>/<label>/<tone group>/<age
-- group>' from the temp table validation_groups (sql/validate/groups.sql).
-- Reads `labels`, `images`. Owner: corpus_audit/stages/validate/
SELECT
    l.image_id,
    i.path,
    i.source || '/' || stratum_label(l.label, g.tone_group, g.age_group, $by_attributes)
        AS stratum
FROM labels l
JOIN images i USING (image_id)
JOIN validation_groups g USING (image_id)
WHERE l.classifier = $classifier;
