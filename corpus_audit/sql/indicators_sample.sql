-- The `no_indicators` training subsets (METHODS 1.5): per occupation, a uniform random sample
-- of $n captions among those that mention it and are labelled 'none'.
-- Same rule as the keyword sample (select): captions ordered by hash(caption_id, $seed), ties
-- by caption_id, so the sample is the same whatever the thread count or file order, and the
-- keyword sample's indicator-free captions come first in the same order.
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
            PARTITION BY m.occupation ORDER BY hash(m.caption_id, $seed), m.caption_id
        ) AS rank
    FROM (SELECT DISTINCT occupation, caption_id FROM mentions) m
    JOIN indicators i ON i.caption_id = m.caption_id
    WHERE i.label = 'none'
)
WHERE rank <= $n
ORDER BY occupation, rank;
