-- select, step 6: strategy 'keyword' = per occupation a uniform random sample of $n captions
-- without replacement (all of them when fewer), ranked 1..n. $n is select.sample_size, or the
-- candidates ceil(sample_size x overdraw) when the subset is cut later at N labelled images.
-- The order is md5('keyword:<seed>:<occupation>:<sample key>'), sample key = the corpus key
-- column, else '<file key>:<row in file>' (file key: corpus_files.sample_key, the file name
-- or the shortest path tail that tells two equal names apart): a pseudo-random permutation
-- that depends only on the seed and on stable keys, never on thread count, file order, where
-- the corpus lies or DuckDB's hash(), so the same corpus and seed give the same sample on any
-- machine and version. caption_id breaks (improbable) ties.
INSERT INTO samples (strategy, occupation, prompt_id, caption_id, rank, score)
SELECT 'keyword', occupation, NULL, caption_id, rank, NULL
FROM (
    SELECT m.occupation, m.caption_id,
           row_number() OVER (
               PARTITION BY m.occupation
               ORDER BY md5(concat_ws(':', 'keyword', $seed::VARCHAR, m.occupation,
                                      coalesce(c.key, f.sample_key || ':'
                                                      || c.row_in_file::VARCHAR))),
                        m.caption_id
           ) AS rank
    FROM mentions m
    JOIN _select_candidates c ON c.caption_id = m.caption_id
    JOIN corpus_files f ON f.file_id = c.file_id
)
WHERE rank <= $n;
