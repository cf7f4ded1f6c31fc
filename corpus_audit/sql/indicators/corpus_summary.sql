-- Per corpus group and occupation, and pooled (corpus_group NULL), the select counts and the
-- explicit gender indicators of the occupation captions (the rows of corpus_summary, without
-- the Wilson interval, which the stage adds). A caption belongs to the group of its file
-- (caption_id >> 40 = file_id, schema/001_select.sql). Per-occupation rows count (occupation,
-- caption) pairs; occupation-NULL rows count distinct captions and carry the mean over the
-- group's occupations of each one's share (the paper's statistic). Every group has its
-- occupation-NULL row, with zeros when none of its captions names an occupation.
WITH names AS (
    SELECT caption_id, count(*) AS n
    FROM indicator_triggers WHERE kind = 'name' GROUP BY caption_id
),
cap AS (
    SELECT i.caption_id, g.corpus_group, i.label, coalesce(n.n, 0) AS names
    FROM indicators i
    JOIN corpus_file_groups g ON g.file_id = (i.caption_id >> 40)
    LEFT JOIN names n ON n.caption_id = i.caption_id
    WHERE i.caption_id IN (SELECT caption_id FROM mentions)
),
per_occ AS (
    SELECT c.corpus_group, m.occupation,
           count(*) AS captions,
           count(*) FILTER (WHERE c.label <> 'none') AS with_indicator,
           count(*) FILTER (WHERE c.label = 'male') AS male_only,
           count(*) FILTER (WHERE c.label = 'female') AS female_only,
           count(*) FILTER (WHERE c.label = 'both') AS both_genders,
           sum(c.names) AS name_triggers
    FROM (SELECT DISTINCT occupation, caption_id FROM mentions) m
    JOIN cap c ON c.caption_id = m.caption_id
    GROUP BY GROUPING SETS ((c.corpus_group, m.occupation), (m.occupation))
),
overall AS (
    SELECT corpus_group,
           count(*) AS captions,
           count(*) FILTER (WHERE label <> 'none') AS with_indicator,
           count(*) FILTER (WHERE label = 'male') AS male_only,
           count(*) FILTER (WHERE label = 'female') AS female_only,
           count(*) FILTER (WHERE label = 'both') AS both_genders,
           sum(names) AS name_triggers
    FROM cap
    GROUP BY GROUPING SETS ((corpus_group), ())
),
means AS (
    SELECT corpus_group,
           -- ORDER BY: summed in one order, the same bits on every run and engine
           avg(100.0 * with_indicator / captions ORDER BY occupation) AS mean_pct,
           count(*) AS occupations
    FROM per_occ GROUP BY corpus_group
),
files AS (
    SELECT g.corpus_group, count(*) AS files, sum(coalesce(f.rows_total, 0)) AS rows_total,
           bool_or(g.hypernymized) AS hypernymized
    FROM corpus_file_groups g JOIN corpus_files f ON f.file_id = g.file_id
    GROUP BY GROUPING SETS ((g.corpus_group), ())
)
SELECT f.corpus_group, NULL::VARCHAR AS occupation, f.files, f.rows_total,
       coalesce(o.captions, 0) AS captions, coalesce(o.with_indicator, 0) AS with_indicator,
       coalesce(o.male_only, 0) AS male_only, coalesce(o.female_only, 0) AS female_only,
       coalesce(o.both_genders, 0) AS both_genders,
       mn.mean_pct AS mean_occupation_pct, coalesce(mn.occupations, 0) AS occupations,
       coalesce(o.name_triggers, 0) AS name_triggers, f.hypernymized
FROM files f
LEFT JOIN overall o ON o.corpus_group IS NOT DISTINCT FROM f.corpus_group
LEFT JOIN means mn ON mn.corpus_group IS NOT DISTINCT FROM f.corpus_group
UNION ALL
SELECT p.corpus_group, p.occupation, f.files, f.rows_total, p.captions, p.with_indicator,
       p.male_only, p.female_only, p.both_genders, NULL, NULL, p.name_triggers, f.hypernymized
FROM per_occ p JOIN files f ON f.corpus_group IS NOT DISTINCT FROM p.corpus_group
ORDER BY corpus_group NULLS LAST, occupation NULLS FIRST;
