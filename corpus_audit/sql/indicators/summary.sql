-- Per occupation: captions that mention it and their explicit gender indicators (METHODS 1.6).
-- Percentages (0-100, one decimal) are over the occupation's captions; a caption naming two
-- occupations counts for both. male_only / female_only = label male / female; both = both.
SELECT
    m.occupation,
    count(*) AS captions,
    round(100 * (count(*) FILTER (WHERE i.label <> 'none'))::DOUBLE / count(*), 1) AS pct_any_indicator,
    round(100 * (count(*) FILTER (WHERE i.label = 'male'))::DOUBLE / count(*), 1) AS pct_male_only,
    round(100 * (count(*) FILTER (WHERE i.label = 'female'))::DOUBLE / count(*), 1) AS pct_female_only,
    round(100 * (count(*) FILTER (WHERE i.label = 'both'))::DOUBLE / count(*), 1) AS pct_both,
    count(*) FILTER (WHERE i.label = 'none') AS captions_none
FROM (SELECT DISTINCT occupation, caption_id FROM mentions) m
JOIN indicators i ON i.caption_id = m.caption_id
GROUP BY m.occupation
ORDER BY m.occupation;
