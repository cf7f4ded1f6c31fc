-- The perceived-age model and skin-tone method the attribute analysis reads: for age the
-- model the study's settings name ($age_model, label.age_precision) when it has rows, else the
-- one with the most rows (ties: the name); for skin tone the method with the most rows; NULL
-- when the label stage measured none.
-- Owner: corpus_audit/stages/analyze/attributes.py
SELECT
    (SELECT model FROM perceived_age GROUP BY model
     ORDER BY model IS NOT DISTINCT FROM $age_model DESC, count(*) DESC, model LIMIT 1)
        AS age_model,
    (SELECT method FROM skin_tone WHERE status = 'measured'
     GROUP BY method ORDER BY count(*) DESC, method LIMIT 1) AS skin_method;
