-- Paraphrased captions used as prompts: one row per (caption, occupation) of the training
-- subsets of $strategies after the cut (temp table subset_prompt_captions) with its paraphrase
-- by $paraphraser; `strategy` is the first (in $strategies order) that holds the caption for
-- that occupation.
SELECT caption_id, occupation, strategy, text, contains_occupation
FROM (
    SELECT
        s.caption_id,
        s.occupation,
        s.strategy,
        p.text,
        p.contains_occupation,
        row_number() OVER (
            PARTITION BY s.caption_id, s.occupation
            ORDER BY list_position($strategies, s.strategy), s.rank
        ) AS k
    FROM subset_prompt_captions s
    JOIN paraphrases p
      ON p.caption_id = s.caption_id
     AND p.occupation = s.occupation
     AND p.paraphraser = $paraphraser
    WHERE list_contains($strategies, s.strategy)
)
WHERE k = 1
ORDER BY occupation, caption_id;
