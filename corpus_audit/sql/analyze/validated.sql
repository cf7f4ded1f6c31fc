-- The validated images the misclassification correction learns from (docs/analysis.md,
-- "Correcting for the classifier's errors"): one row per image whose annotators' majority in
-- `human_labels` (validate import) is female or male (strictly more votes than any other
-- label; ties and 'unsure' majorities are left out) and that the analysis counts (temp table
-- analysis_labelled: the classifier $classifier's label after analysis.threshold, face filter
-- kept). side / model_id name its source; stratum_label is the stored label of $classifier
-- (the stratum `validate export` drew it from), with $by_attributes also its tone and age
-- group (temp table validation_groups, sql/validate/groups.sql). Owner: corpus_audit/stages/analyze/correction.py
WITH votes AS (
    SELECT image_id, label, count(*) AS n
    FROM human_labels
    WHERE label IN ('female', 'male', 'unsure')  -- '': only the further questions answered
    GROUP BY image_id, label
),
majority AS (
    SELECT v.image_id, v.label AS truth
    FROM votes v
    WHERE v.n > coalesce(
        (SELECT max(o.n) FROM votes o WHERE o.image_id = v.image_id AND o.label <> v.label), 0
    )
)
SELECT
    m.image_id,
    i.source AS side,
    CASE WHEN i.source = 'generated' THEN coalesce(i.model_id, 'unknown') END AS model_id,
    stratum_label(l.label, g.tone_group, g.age_group, $by_attributes) AS stratum_label,
    m.truth,
    a.label AS predicted
FROM majority m
JOIN images i ON i.image_id = m.image_id
JOIN analysis_labelled a ON a.image_id = m.image_id
JOIN labels l ON l.image_id = m.image_id AND l.classifier = $classifier
JOIN validation_groups g ON g.image_id = m.image_id
WHERE m.truth IN ('female', 'male')
  AND i.source IN ('training', 'generated')
ORDER BY m.image_id;
