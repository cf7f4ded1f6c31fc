-- Captions (or their paraphrases) used as prompts that carry a one-sided indicator (male or
-- female): how many of their labelled generated images show the indicated perceived gender.
-- kind: caption | paraphrase (images.strategy 'paraphrased:...').
SELECT
    coalesce(i.model_id, 'unknown') AS model_id,
    CASE WHEN coalesce(i.strategy, '') LIKE 'paraphrased:%' THEN 'paraphrase'
         ELSE 'caption' END AS kind,
    d.label AS indicator,
    count(DISTINCT i.image_id) AS n_images,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = d.label) AS n_match
FROM images i
JOIN indicators d ON d.caption_id = i.caption_id
JOIN analysis_labelled a ON a.image_id = i.image_id
WHERE i.source = 'generated'
  AND i.caption_id IS NOT NULL
  AND d.label IN ('male', 'female')
  AND a.label IN ('male', 'female')
GROUP BY ALL
ORDER BY model_id, kind, indicator;
