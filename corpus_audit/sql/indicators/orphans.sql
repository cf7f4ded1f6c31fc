-- Labels that no longer describe a current caption: the caption left `mentions`, or its text
-- changed (select rerun on a changed corpus), or it has no recorded text. Removed, so
-- `indicators` always describes the current mentions; the stage then labels them anew.
CREATE OR REPLACE TEMP TABLE indicators_stale AS
SELECT i.caption_id
FROM indicators i
LEFT JOIN captions c ON c.caption_id = i.caption_id
LEFT JOIN indicator_texts t ON t.caption_id = i.caption_id
WHERE c.caption_id IS NULL
   OR t.caption_id IS NULL
   OR t.text_md5 <> md5_number(c.text)
   OR i.caption_id NOT IN (SELECT caption_id FROM mentions);
DELETE FROM indicator_triggers WHERE caption_id IN (SELECT caption_id FROM indicators_stale);
DELETE FROM indicators WHERE caption_id IN (SELECT caption_id FROM indicators_stale);
DELETE FROM indicator_texts WHERE caption_id NOT IN (SELECT caption_id FROM indicators);
