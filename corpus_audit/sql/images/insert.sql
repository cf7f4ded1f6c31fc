-- images: one training image; parameters image_id, caption_id, occupation, path, origin.
INSERT INTO images (image_id, source, caption_id, occupation, path, origin)
VALUES (?, 'training', ?, ?, ?, ?);
