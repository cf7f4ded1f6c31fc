-- select, step 2b (select.matcher = hyperscan, once per group of record batches): the mentions
-- the scan units' matcher found, one row per (caption, occupation) with its first form and
-- that form's place among the caption's matches (the rows 20_found-22_edges would give after
-- 25_mentions' arg_min; the match text itself is the form, since forms are mapped by pattern).
INSERT INTO _select_found (caption_id, pos, norm, form, occupation)
SELECT (file_id::BIGINT << 40) | row_in_file, pos, form, form, occupation
FROM _select_batch_mentions;
