-- The training images the `recaption` stage captions, in image_id order, with the caption
-- text of their caption row and the occupation a text rewrite must keep: the image's own
-- (set when its caption was sampled for exactly one occupation), else the first, by name, of
-- the occupations the caption mentions.
SELECT
    i.image_id,
    i.path,
    c.text,
    coalesce(
        i.occupation,
        (SELECT min(m.occupation) FROM mentions m WHERE m.caption_id = i.caption_id)
    ) AS occupation
FROM images i
LEFT JOIN captions c ON c.caption_id = i.caption_id
WHERE i.source = 'training'
ORDER BY i.image_id
