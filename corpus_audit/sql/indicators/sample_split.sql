-- The `no_indicators` training subsets as the split of the keyword sample
-- (indicators.no_indicator_sample = 'split', the paper: "we split the training examples
-- selected in Section 4"): per occupation, the captions of its keyword sample (every ranked
-- candidate) whose indicator label is 'none', in the keyword sample's rank order, ranked 1..
-- The subset then holds exactly the indicator-free part of the keyword subset: when the
-- keyword subset is cut at N labelled images, the no_indicators subset is that cut's
-- indicator-free captions (corpus_audit/tables/subsets.py), not a cut of its own.
-- Creates the temp table indicators_sample_new (read by indicators/sample_diff.sql and
-- indicators/sample_write.sql; corpus_audit/stages/indicators/__init__.py drops it).
CREATE OR REPLACE TEMP TABLE indicators_sample_new AS
SELECT
    'no_indicators' AS strategy,
    s.occupation,
    NULL::VARCHAR AS prompt_id,
    s.caption_id,
    (row_number() OVER (PARTITION BY s.occupation ORDER BY s.rank, s.caption_id))::INTEGER AS rank,
    NULL::DOUBLE AS score
FROM samples s
JOIN indicators i ON i.caption_id = s.caption_id
WHERE s.strategy = 'keyword' AND i.label = 'none'
ORDER BY s.occupation, rank;
