-- Report: up to four example captions per indicator label (not 'none'), in a fixed
-- pseudo-random order (hash of the caption id). Reads `indicators`, `captions`.
-- Owner: corpus_audit/report/context.py
SELECT label, triggers, text FROM (
    SELECT d.label, d.triggers, c.text,
           row_number() OVER (PARTITION BY d.label ORDER BY hash(c.caption_id)) AS k
    FROM indicators d JOIN captions c USING (caption_id)
    WHERE d.label <> 'none'
) WHERE k <= 4 ORDER BY label, k;
