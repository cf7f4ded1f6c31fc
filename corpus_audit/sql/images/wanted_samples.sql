-- images (scope = 'samples'): the captions of the training subsets, one row per caption:
-- caption_id, its url, and its occupation when it is sampled for exactly one (else NULL).
SELECT s.caption_id, any_value(c.url),
       CASE WHEN count(DISTINCT s.occupation) = 1 THEN min(s.occupation) END
FROM samples s JOIN captions c USING (caption_id)
GROUP BY s.caption_id;
