-- The captions of the recaption variants, one per training caption row (caption_id), for the
-- `variants` stage. A skipped image (NULL caption: unreadable, no text) is no caption of its
-- variant. When two training images share a caption row, the first by image_id speaks for it.
SELECT
    r.variant,
    i.caption_id,
    r.caption AS text,
    'recaption:' || r.model_id AS source
FROM recaptions r
JOIN images i ON i.image_id = r.image_id AND i.source = 'training'
WHERE r.caption IS NOT NULL
  AND trim(r.caption) <> ''
  AND i.caption_id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY r.variant, i.caption_id ORDER BY r.image_id) = 1
