-- Captions in `mentions` that have no indicator label yet (what this run must do), numbered
-- for batching. Ordered by a hash of the text so identical captions share a batch and are
-- processed once; the order only decides batching, never a result.
CREATE OR REPLACE TEMP TABLE indicators_todo AS
SELECT
    (row_number() OVER (ORDER BY hash(c.text), c.caption_id) - 1)::BIGINT AS rn,
    c.caption_id,
    c.text
FROM captions c
WHERE c.caption_id IN (SELECT caption_id FROM mentions)
  AND c.caption_id NOT IN (SELECT caption_id FROM indicators);
