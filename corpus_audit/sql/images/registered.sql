-- images: caption ids that already have a training image (a rerun skips them).
SELECT caption_id FROM images WHERE source = 'training' AND caption_id IS NOT NULL;
