-- select, step 5: the captions that mention at least one occupation, verbatim (HTML and all),
-- with their url, source file and 0-based row in that file.
INSERT INTO captions (caption_id, text, url, source_file, row_in_file)
SELECT c.caption_id, c.text, c.url, f.path, c.row_in_file
FROM _select_candidates c
JOIN corpus_files f ON f.file_id = c.file_id
WHERE c.caption_id IN (SELECT caption_id FROM mentions);
