-- Image side, per occupation, for the training subset of strategy $strategy after the cut
-- (temp table subset_members; per occupation, prompt_id NULL): labelled training images by
-- perceived gender, and how many of them have a caption with any explicit indicator
-- ("marked") or with a female indicator (female or both).
-- Feeds the correlation of training %female with the share of female-indicator captions.
SELECT
    s.occupation,
    count(DISTINCT s.image_id) FILTER (WHERE s.state = 'female') AS n_female_images,
    count(DISTINCT s.image_id) FILTER (WHERE s.state = 'male') AS n_male_images,
    count(DISTINCT s.image_id) FILTER (
        WHERE s.state = 'female' AND d.label IN ('male', 'female', 'both')) AS n_female_marked,
    count(DISTINCT s.image_id) FILTER (
        WHERE s.state = 'male' AND d.label IN ('male', 'female', 'both')) AS n_male_marked,
    count(DISTINCT s.image_id) FILTER (
        WHERE s.state IN ('male', 'female') AND d.label IN ('female', 'both')) AS n_female_indicator,
    count(DISTINCT s.image_id) FILTER (
        WHERE s.state IN ('male', 'female') AND d.label IS NOT NULL) AS n_checked_images
FROM subset_members s
LEFT JOIN indicators d ON d.caption_id = s.caption_id
WHERE s.strategy = $strategy AND s.prompt_id IS NULL AND s.member
  AND s.state IN ('male', 'female')
GROUP BY s.occupation
ORDER BY s.occupation;
