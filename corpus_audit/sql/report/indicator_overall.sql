-- Report: corpus-wide indicator counts over the distinct captions of `mentions`: how many,
-- how many have a label, how many carry an indicator. Reads `mentions`, `indicators`.
-- Owner: corpus_audit/report/context.py
SELECT count(*) AS captions,
       count(d.caption_id) AS checked,
       count(*) FILTER (WHERE d.label IN ('male', 'female', 'both')) AS with_indicator
FROM (SELECT DISTINCT caption_id FROM mentions) m
LEFT JOIN indicators d USING (caption_id);
