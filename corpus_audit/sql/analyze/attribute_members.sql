-- The measured faces of every image set of the attribute analysis (docs/attributes.md), one row
-- per (set, image): training sets are the members of the training subsets after the cut (temp
-- table subset_members, sql/subsets/cut.sql) whose image passed the face filter, all prompts of
-- an occupation together; generated sets are a model's images per occupation (temp table
-- analysis_labelled: kept by the face filter). Joined with the perceived age of $age_model and
-- the skin tone of $skin_method (L* and hue; NULL where not measured). gender is the analysis label
-- (female | male | ambiguous). Owner: corpus_audit/stages/analyze/attributes.py
WITH training AS (
    SELECT DISTINCT 'training' AS source, strategy, occupation, image_id, state AS gender
    FROM subset_members
    WHERE member AND image_id IS NOT NULL AND state IN ('female', 'male', 'ambiguous')
),
generated AS (
    SELECT DISTINCT
        coalesce(i.model_id, 'unknown') AS source,
        CAST(NULL AS VARCHAR) AS strategy,
        coalesce(p.occupation, i.occupation) AS occupation,
        i.image_id,
        a.label AS gender
    FROM images i
    JOIN analysis_labelled a ON a.image_id = i.image_id
    LEFT JOIN prompts p ON p.prompt_id = i.prompt_id
    WHERE i.source = 'generated' AND i.prompt_id IS NOT NULL
      AND i.prompt_id NOT IN (SELECT prompt_id FROM prompt_categories)
)
SELECT
    m.source, m.strategy, m.occupation, m.gender,
    age.expected_age, age.age_bin, age.age_group, age.minor,
    sk.status = 'measured' AS skin_measured, sk.l_star, sk.hue_deg
FROM (SELECT * FROM training UNION ALL SELECT * FROM generated) m
LEFT JOIN perceived_age age ON age.image_id = m.image_id AND age.model = $age_model
LEFT JOIN skin_tone sk ON sk.image_id = m.image_id AND sk.method = $skin_method
WHERE m.occupation IS NOT NULL
ORDER BY m.source, m.strategy, m.occupation, m.image_id;
