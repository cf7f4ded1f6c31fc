-- The training images the `recaption` stage captions, in image_id order, with the caption
-- text and occupation of their caption row (for the text-only rewrite kind).
SELECT
    i.image_id,
    i.path,
    c.text,
    i.occupation
FROM images i
LEFT JOIN captions c ON c.caption_id = i.caption_id
WHERE i.source = 'training'
ORDER BY i.image_id
