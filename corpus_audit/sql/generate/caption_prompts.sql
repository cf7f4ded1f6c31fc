-- Captions used as prompts (METHODS 1.5, "captions as prompts"): one row per caption of the
-- training subsets of the strategies in $strategies (a list, in priority order), after the cut:
-- the temp table subset_prompt_captions (sql/generate/caption_pool.sql). A caption chosen by
-- several strategies or occupations is generated once; `strategy` and `occupation` are those of
-- its first subset row (strategy order of $strategies, then occupation, then rank). Which
-- subsets an image belongs to is a join of images.caption_id with the subsets.
SELECT caption_id, text, strategy, occupation
FROM (
    SELECT
        s.caption_id,
        c.text,
        s.strategy,
        s.occupation,
        row_number() OVER (
            PARTITION BY s.caption_id
            ORDER BY list_position($strategies, s.strategy), s.occupation, s.rank
        ) AS k
    FROM subset_prompt_captions s
    JOIN captions c USING (caption_id)
    WHERE list_contains($strategies, s.strategy)
)
WHERE k = 1
ORDER BY occupation, caption_id;
