-- Labels of captions that are no longer in `mentions` (select was rerun on another corpus or
-- lexicon): removed, so `indicators` always describes the current mentions.
DELETE FROM indicator_triggers
WHERE caption_id NOT IN (SELECT caption_id FROM mentions);
DELETE FROM indicators
WHERE caption_id NOT IN (SELECT caption_id FROM mentions);
