-- select, step 2 (once per group of record batches): keep the rows whose caption mentions any
-- form. $pattern is the alternation of every lexicon form with word-boundary guards (built by
-- corpus_audit.stages.select.build_matcher); 'i' = case-insensitive. When the RE2 prefilter already
-- ran in pyarrow ($prefiltered), _select_batch holds only its matches and the regex is not run
-- again here: step 3 (regexp_extract_all) decides what counts as a mention either way.
INSERT INTO _select_candidates
SELECT (file_id::BIGINT << 40) | row_in_file, file_id, row_in_file, text, url, key
FROM _select_batch
WHERE text IS NOT NULL AND ($prefiltered OR regexp_matches(text, $pattern, 'i'));
