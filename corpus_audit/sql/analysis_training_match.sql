-- The paper's version of the indicator-match statistic: captions with a one-sided indicator
-- (male or female) used as prompts whose training image has a perceived-gender label; how many
-- of their labelled generated images show the perceived gender of the caption's TRAINING IMAGE
-- (sql/analysis_indicator_match.sql compares with the caption's indicator instead).
-- Grouped by the training image's label; kind: caption | paraphrase.
SELECT
    coalesce(i.model_id, 'unknown') AS model_id,
    CASE WHEN coalesce(i.strategy, '') LIKE 'paraphrased:%' THEN 'paraphrase'
         ELSE 'caption' END AS kind,
    ta.label AS indicator,
    count(DISTINCT i.image_id) AS n_images,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = ta.label) AS n_match
FROM images i
JOIN indicators d ON d.caption_id = i.caption_id
JOIN analysis_labelled a ON a.image_id = i.image_id
JOIN images t ON t.source = 'training' AND t.caption_id = i.caption_id
JOIN analysis_labelled ta ON ta.image_id = t.image_id
WHERE i.source = 'generated'
  AND i.caption_id IS NOT NULL
  AND d.label IN ('male', 'female')
  AND a.label IN ('male', 'female')
  AND ta.label IN ('male', 'female')
GROUP BY ALL
ORDER BY model_id, kind, indicator;
