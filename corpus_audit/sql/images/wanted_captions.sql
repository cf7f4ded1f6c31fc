-- images (scope = 'captions'): every selected caption, one row per caption: caption_id, its
-- url, and its occupation when it mentions exactly one (else NULL).
SELECT c.caption_id, any_value(c.url),
       CASE WHEN count(DISTINCT m.occupation) = 1 THEN min(m.occupation) END
FROM captions c LEFT JOIN mentions m USING (caption_id)
GROUP BY c.caption_id;
