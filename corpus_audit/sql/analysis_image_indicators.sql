-- Image side, per occupation, for the training subset of strategy $strategy (per occupation,
-- prompt_id NULL): labelled training images by perceived gender, and how many of them have a
-- caption with any explicit indicator ("marked") or with a female indicator (female or both).
-- Feeds the correlation of training %female with the share of female-indicator captions.
SELECT
    s.occupation,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'female') AS n_female_images,
    count(DISTINCT i.image_id) FILTER (WHERE a.label = 'male') AS n_male_images,
    count(DISTINCT i.image_id) FILTER (
        WHERE a.label = 'female' AND d.label IN ('male', 'female', 'both')) AS n_female_marked,
    count(DISTINCT i.image_id) FILTER (
        WHERE a.label = 'male' AND d.label IN ('male', 'female', 'both')) AS n_male_marked,
    count(DISTINCT i.image_id) FILTER (
        WHERE a.label IN ('male', 'female') AND d.label IN ('female', 'both')) AS n_female_indicator,
    count(DISTINCT i.image_id) FILTER (
        WHERE a.label IN ('male', 'female') AND d.label IS NOT NULL) AS n_checked_images
FROM samples s
JOIN images i ON i.source = 'training' AND i.caption_id = s.caption_id
JOIN analysis_labelled a ON a.image_id = i.image_id
LEFT JOIN indicators d ON d.caption_id = s.caption_id
WHERE s.strategy = $strategy AND s.prompt_id IS NULL
GROUP BY s.occupation
ORDER BY s.occupation;
