-- The `no_indicators` training subsets drawn afresh (indicators.no_indicator_sample = 'fresh';
-- METHODS 1.5): per occupation, a uniform random sample of $n captions (all when fewer) among
-- those that mention it and are labelled 'none'. $n is select.sample_size, or the candidates
-- ceil(sample_size x overdraw) when the subset is cut later at N labelled images.
-- Same permutation as the keyword sample of `select` (sql/select/40_samples.sql):
-- md5('keyword:<seed>:<occupation>:<file key>:<row in file>') ascending, caption_id breaking
-- ties. So the sample depends only on the seed and stable keys (never on thread count, file
-- order or DuckDB's hash()), and every indicator-free caption of the keyword sample is in it.
-- (When corpus.key_column is set, select orders by that key, which `captions` does not keep;
-- this sample then still uses file key and row.)
-- Creates the temp table indicators_sample_new (read by indicators/sample_diff.sql and
-- indicators/sample_write.sql; corpus_audit/stages/indicators/__init__.py drops it).
CREATE OR REPLACE TEMP TABLE indicators_sample_new AS
SELECT
    'no_indicators' AS strategy,
    occupation,
    NULL::VARCHAR AS prompt_id,
    caption_id,
    rank::INTEGER AS rank,
    NULL::DOUBLE AS score
FROM (
    SELECT
        m.occupation,
        m.caption_id,
        row_number() OVER (
            PARTITION BY m.occupation
            ORDER BY md5(concat_ws(':', 'keyword', $seed::VARCHAR, m.occupation,
                                   coalesce(f.sample_key, parse_filename(c.source_file)) || ':'
                                   || c.row_in_file::VARCHAR)),
                     m.caption_id
        ) AS rank
    FROM (SELECT DISTINCT occupation, caption_id FROM mentions) m
    JOIN captions c ON c.caption_id = m.caption_id
    JOIN indicators i ON i.caption_id = m.caption_id
    LEFT JOIN corpus_files f ON f.path = c.source_file
    WHERE i.label = 'none'
)
WHERE rank <= $n
ORDER BY occupation, rank;
