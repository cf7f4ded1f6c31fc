-- Caption side, per occupation: captions that mention it (all of `mentions`, not a sample) and
-- their explicit gender indicator labels (METHODS 1.6). n_checked counts captions the
-- indicators stage labelled; percentages are taken over n_checked.
SELECT
    m.occupation,
    count(*) AS n_captions,
    count(d.caption_id) AS n_checked,
    count(*) FILTER (WHERE d.label = 'male') AS n_male,
    count(*) FILTER (WHERE d.label = 'female') AS n_female,
    count(*) FILTER (WHERE d.label = 'both') AS n_both,
    count(*) FILTER (WHERE d.label = 'none') AS n_none
FROM (SELECT DISTINCT caption_id, occupation FROM mentions) m
LEFT JOIN indicators d ON d.caption_id = m.caption_id
GROUP BY m.occupation
ORDER BY m.occupation;
