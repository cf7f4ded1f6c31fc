-- images (link = 'row'): where each selected caption comes from, to map a record's row key
-- in a corpus file to its caption_id.
SELECT source_file, row_in_file, caption_id FROM captions;
