-- The perceived skin-tone group and age group of every image, for the validation strata by
-- attribute (`validate export --by-attributes`) and for the analysis' weights of such a sample:
-- tone_group from the L* of $skin_method (l_dark < 50 <= l_mid < 65 <= l_light, as
-- corpus_audit/methods/skin_tone.py; 'none' when not measured), age_group from $age_model
-- (under_35 | 35_54 | 55_plus, 'minor' under 16, 'none' when not estimated). Replaced on each
-- call (temp table validation_groups). Reads `images`, `skin_tone`, `perceived_age`.
-- Owner: corpus_audit/stages/analyze/strata.py
-- Also the macro stratum_label(label, tone_group, age_group, by_attributes): a stored label,
-- with by_attributes also '/<tone group>/<age group>'; the one definition of a stratum's label
-- part (sql/validate/strata.sql, sql/analyze/validation_strata.sql, validated.sql and
-- attribute_validated.sql use it).
CREATE OR REPLACE TEMP MACRO stratum_label(label, tone_group, age_group, by_attributes) AS
    label || CASE WHEN by_attributes THEN '/' || tone_group || '/' || age_group ELSE '' END;

CREATE OR REPLACE TEMP TABLE validation_groups AS
SELECT
    i.image_id,
    CASE
        WHEN st.l_star IS NULL THEN 'none'
        WHEN st.l_star < 50 THEN 'l_dark'
        WHEN st.l_star < 65 THEN 'l_mid'
        ELSE 'l_light'
    END AS tone_group,
    CASE
        WHEN pa.image_id IS NULL THEN 'none'
        WHEN pa.minor THEN 'minor'
        ELSE pa.age_group
    END AS age_group
FROM images i
LEFT JOIN skin_tone st
    ON st.image_id = i.image_id AND st.method = $skin_method AND st.status = 'measured'
LEFT JOIN perceived_age pa ON pa.image_id = i.image_id AND pa.model = $age_model;
