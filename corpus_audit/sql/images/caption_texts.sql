-- Captions of the URL export (images source kind = 'urls'): caption_id, text of the
-- caption ids in the one bound parameter (a list).
SELECT caption_id, text FROM captions WHERE caption_id IN (SELECT unnest($ids));
