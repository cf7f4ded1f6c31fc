-- Corpus-wide: distinct occupation captions (each counted once, whatever the number of
-- occupations it names), how many carry any explicit gender indicator, and how many are
-- still unlabelled: the pooled share. And the mean over occupations of each occupation's share
-- (over the labelled captions that mention it; a caption naming two occupations counts for
-- both), the statistic the paper reports (LAION: 59.5 %), with the number of occupations.
WITH per_occupation AS (
    SELECT m.occupation,
           count(*) AS captions,
           count(*) FILTER (WHERE i.label <> 'none') AS with_indicator
    FROM (SELECT DISTINCT occupation, caption_id FROM mentions) m
    JOIN indicators i ON i.caption_id = m.caption_id
    GROUP BY m.occupation
)
SELECT
    count(*) AS captions,
    count(*) FILTER (WHERE i.label IS NOT NULL AND i.label <> 'none') AS with_indicator,
    count(*) FILTER (WHERE i.label IS NULL) AS unlabelled,
    (SELECT avg(100.0 * with_indicator / captions) FROM per_occupation) AS mean_occupation_pct,
    (SELECT count(*) FROM per_occupation) AS occupations
FROM (SELECT DISTINCT caption_id FROM mentions) m
LEFT JOIN indicators i ON i.caption_id = m.caption_id;
