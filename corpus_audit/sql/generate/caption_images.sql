-- For analysis: every image generated from a caption (or its paraphrase) with EVERY sample
-- it belongs to. images.strategy only names the first strategy that asked for the caption, so
-- subset membership (keyword, no_indicators, nn, nn_no_indicators) comes from `samples`.
-- kind: caption (the caption itself was the prompt) | paraphrase.
SELECT
    i.image_id,
    i.model_id,
    CASE WHEN i.strategy LIKE 'paraphrased:%' THEN 'paraphrase' ELSE 'caption' END AS kind,
    s.strategy,
    s.occupation,
    s.prompt_id,
    i.caption_id,
    i.seed
FROM images i
JOIN samples s
  ON s.caption_id = i.caption_id
 AND (i.strategy NOT LIKE 'paraphrased:%' OR s.occupation = i.occupation)
WHERE i.source = 'generated' AND i.caption_id IS NOT NULL
ORDER BY i.model_id, kind, s.strategy, s.occupation, i.caption_id, i.image_id;
