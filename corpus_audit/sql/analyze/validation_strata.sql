-- Labelled images per stratum (source, stored label of $classifier; with $by_attributes also
-- the tone and age group of temp table validation_groups) that the analysis counts
-- (temp table analysis_labelled: face filter kept): the population each stratum of the
-- validation sample was drawn from (sql/validate/strata.sql draws it uniformly within a
-- stratum, so also within its analysed part; the correction weighs a validated image
-- N_s / n_s). Owner: corpus_audit/stages/analyze/correction.py
SELECT
    i.source AS side,
    CASE WHEN i.source = 'generated' THEN coalesce(i.model_id, 'unknown') END AS model_id,
    stratum_label(l.label, g.tone_group, g.age_group, $by_attributes) AS stratum_label,
    count(*) AS n
FROM labels l
JOIN images i ON i.image_id = l.image_id
JOIN validation_groups g ON g.image_id = l.image_id
JOIN analysis_labelled a ON a.image_id = l.image_id
WHERE l.classifier = $classifier
  AND i.source IN ('training', 'generated')
GROUP BY ALL
ORDER BY ALL;
