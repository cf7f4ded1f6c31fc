-- The validated faces the attribute correction and the Monk calibration learn from
-- (docs/attributes.md, "Correcting for the instrument's errors"): one row per image the analysis
-- counts (temp table analysis_labelled: face filter kept) with an annotator answer in
-- `human_labels` (validate import). The annotators' side: human_age_bin, the band most
-- annotators chose (strictly more answers than any other band; "can't tell" is NULL and not
-- counted; ties: NULL); human_monk, the median of their Monk tones rounded down (NULL: no tone
-- given); human_race, the opt-in race/ethnicity answer most gave (as for age); human_gender,
-- female or male when most said so (as sql/analyze/validated.sql), else NULL. The instruments'
-- side (NULL where not measured): the age band of $age_model, the L* and hue of $skin_method,
-- the analysis' gender label (predicted_gender). stratum_label is the stored label of
-- $classifier, the stratum `validate export` drew the image from (weights N_s / n_s), with
-- $by_attributes also its tone and age group (temp table validation_groups).
-- Owner: corpus_audit/stages/analyze/attribute_errors.py
WITH answers AS (  -- one row per annotator answer, by question
    SELECT image_id, 'age' AS question, age_bin AS answer FROM human_labels
    WHERE age_bin IS NOT NULL
    UNION ALL
    SELECT image_id, 'race', race FROM human_labels WHERE race IS NOT NULL
    UNION ALL
    SELECT image_id, 'gender', label FROM human_labels WHERE label IN ('female', 'male', 'unsure')
),
votes AS (
    SELECT image_id, question, answer, count(*) AS n FROM answers GROUP BY ALL
),
majority AS (  -- the answer with strictly more votes than any other of the same question
    SELECT
        v.image_id,
        max(v.answer) FILTER (WHERE v.question = 'age') AS age_bin,
        max(v.answer) FILTER (WHERE v.question = 'race') AS race,
        max(v.answer) FILTER (WHERE v.question = 'gender' AND v.answer <> 'unsure') AS gender
    FROM votes v
    WHERE v.n > coalesce(
        (SELECT max(o.n) FROM votes o
         WHERE o.image_id = v.image_id AND o.question = v.question AND o.answer <> v.answer),
        0
    )
    GROUP BY v.image_id
),
tones AS (
    SELECT image_id, CAST(floor(median(monk)) AS INTEGER) AS monk
    FROM human_labels
    WHERE monk BETWEEN 1 AND 10
    GROUP BY image_id
),
answered AS (
    SELECT image_id FROM majority
    WHERE age_bin IS NOT NULL OR race IS NOT NULL OR gender IS NOT NULL
    UNION SELECT image_id FROM tones
)
SELECT
    q.image_id,
    i.source AS side,
    CASE WHEN i.source = 'generated' THEN coalesce(i.model_id, 'unknown') END AS model_id,
    stratum_label(l.label, g.tone_group, g.age_group, $by_attributes) AS stratum_label,
    mj.age_bin AS human_age_bin,
    t.monk AS human_monk,
    mj.race AS human_race,
    mj.gender AS human_gender,
    a.label AS predicted_gender,
    pa.age_bin AS predicted_age_bin,
    CASE WHEN st.status = 'measured' THEN st.l_star END AS l_star,
    CASE WHEN st.status = 'measured' THEN st.hue_deg END AS hue_deg
FROM answered q
JOIN images i ON i.image_id = q.image_id
JOIN analysis_labelled a ON a.image_id = q.image_id
LEFT JOIN labels l ON l.image_id = q.image_id AND l.classifier = $classifier
LEFT JOIN validation_groups g ON g.image_id = q.image_id
LEFT JOIN majority mj ON mj.image_id = q.image_id
LEFT JOIN tones t ON t.image_id = q.image_id
LEFT JOIN perceived_age pa ON pa.image_id = q.image_id AND pa.model = $age_model
LEFT JOIN skin_tone st ON st.image_id = q.image_id AND st.method = $skin_method
WHERE i.source IN ('training', 'generated')
ORDER BY q.image_id;
