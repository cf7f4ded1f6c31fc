-- The variant 'original' of the caption rows in _variant_ids (registered by the stage: the
-- recaptioned training images): the text `select` stored, from the column it read.
SELECT
    'original' AS variant,
    c.caption_id,
    c.text,
    'column:' || coalesce(f.text_column, '') AS source
FROM captions c
LEFT JOIN corpus_files f ON f.file_id = (c.caption_id >> 40)
WHERE c.caption_id IN (SELECT caption_id FROM _variant_ids)
