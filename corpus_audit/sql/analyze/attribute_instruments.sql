-- The perceived-age model and skin-tone method the attribute analysis reads: the one with the
-- most rows of each (ties: the name), NULL when the label stage measured none.
-- Owner: corpus_audit/stages/analyze/attributes.py
SELECT
    (SELECT model FROM perceived_age GROUP BY model ORDER BY count(*) DESC, model LIMIT 1)
        AS age_model,
    (SELECT method FROM skin_tone WHERE status = 'measured'
     GROUP BY method ORDER BY count(*) DESC, method LIMIT 1) AS skin_method;
