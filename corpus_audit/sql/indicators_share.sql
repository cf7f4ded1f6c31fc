-- Corpus-wide: distinct occupation captions (each counted once, whatever the number of
-- occupations it names), how many carry any explicit gender indicator, and how many are
-- still unlabelled. The paper reports 59.5 % with an indicator on LAION.
SELECT
    count(*) AS captions,
    count(*) FILTER (WHERE i.label IS NOT NULL AND i.label <> 'none') AS with_indicator,
    count(*) FILTER (WHERE i.label IS NULL) AS unlabelled
FROM (SELECT DISTINCT caption_id FROM mentions) m
LEFT JOIN indicators i ON i.caption_id = m.caption_id;
