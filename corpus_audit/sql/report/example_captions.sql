-- Report: the first $n captions of each occupation's keyword sample (by rank), with their
-- indicator label. Reads `samples`, `captions`, `indicators`. Owner: corpus_audit/report/context.py
SELECT occupation, text, label AS indicator FROM (
    SELECT s.occupation, c.text, d.label,
           row_number() OVER (PARTITION BY s.occupation ORDER BY s.rank) AS k
    FROM samples s JOIN captions c USING (caption_id)
    LEFT JOIN indicators d USING (caption_id)
    WHERE s.strategy = 'keyword'
) WHERE k <= $n;
