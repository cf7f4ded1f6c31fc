-- Captions still to paraphrase: each (caption, occupation) of the training subsets of
-- $strategies after the cut (temp table subset_prompt_captions) that has no paraphrase by
-- $paraphraser yet. The paraphrase instruction names the occupation, so a caption held for
-- two occupations is paraphrased twice.
SELECT DISTINCT s.caption_id, s.occupation, c.text
FROM subset_prompt_captions s
JOIN captions c USING (caption_id)
WHERE list_contains($strategies, s.strategy)
  AND NOT EXISTS (
      SELECT 1 FROM paraphrases p
      WHERE p.caption_id = s.caption_id
        AND p.occupation = s.occupation
        AND p.paraphraser = $paraphraser
  )
ORDER BY s.occupation, s.caption_id;
