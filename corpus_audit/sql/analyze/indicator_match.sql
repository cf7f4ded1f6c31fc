-- Captions (or their paraphrases) used as prompts that carry a one-sided indicator (male or
-- female): how many of their labelled generated images show the perceived gender of a
-- reference. kind: caption | paraphrase (images.strategy 'paraphrased:...').
--   reference 'indicator':      the caption's indicator (indicator = that label);
--   reference 'training_image': the paper's, the perceived gender of the caption's own
--                               training image, for captions whose training image is labelled
--                               (indicator = that label).
WITH prompted AS (
    SELECT
        coalesce(i.model_id, 'unknown') AS model_id,
        CASE WHEN coalesce(i.strategy, '') LIKE 'paraphrased:%' THEN 'paraphrase'
             ELSE 'caption' END AS kind,
        i.image_id,
        a.label AS generated,
        d.label AS caption_indicator,
        ta.label AS training_image
    FROM images i
    JOIN indicators d ON d.caption_id = i.caption_id
    JOIN analysis_labelled a ON a.image_id = i.image_id
    LEFT JOIN images t ON t.source = 'training' AND t.caption_id = i.caption_id
    LEFT JOIN analysis_labelled ta ON ta.image_id = t.image_id AND ta.label IN ('male', 'female')
    WHERE i.source = 'generated'
      AND i.caption_id IS NOT NULL
      AND d.label IN ('male', 'female')
      AND a.label IN ('male', 'female')
),
compared AS (
    SELECT model_id, kind, 'indicator' AS reference, caption_indicator AS indicator, image_id,
           generated
    FROM prompted
    UNION ALL
    SELECT model_id, kind, 'training_image', training_image, image_id, generated
    FROM prompted WHERE training_image IS NOT NULL
)
SELECT
    model_id, kind, reference, indicator,
    count(DISTINCT image_id) AS n_images,
    count(DISTINCT image_id) FILTER (WHERE generated = indicator) AS n_match
FROM compared
GROUP BY ALL
ORDER BY model_id, kind, reference, indicator;
