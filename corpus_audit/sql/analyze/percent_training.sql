-- %female inputs per training subset after the cut (temp table subset_members,
-- sql/subsets/cut.sql): each (strategy, occupation, prompt_id) subset, the training images of
-- the candidates the cut went through (n_images), its captions (n_captions) and how many of
-- its images are labelled female / male. prompt_id (and so template_id) is NULL for
-- per-occupation strategies (keyword, no_indicators). n_target is the N the subset is cut at
-- (NULL for a no_indicators subset split from the keyword one).
SELECT
    s.strategy,
    s.occupation,
    s.prompt_id,
    p.template_id,
    count(DISTINCT s.image_id) FILTER (WHERE s.scanned) AS n_images,
    count(*) FILTER (WHERE s.member) AS n_captions,
    count(*) FILTER (WHERE s.member AND s.state = 'female') AS n_female,
    count(*) FILTER (WHERE s.member AND s.state = 'male') AS n_male,
    any_value(s.target) AS n_target,
    count(*) AS n_candidates
FROM subset_members s
LEFT JOIN prompts p ON p.prompt_id = s.prompt_id
GROUP BY s.strategy, s.occupation, s.prompt_id, p.template_id
ORDER BY s.strategy, s.occupation, p.template_id NULLS FIRST;
