-- Per training subset after the cut (needs subsets/cut.sql first): what it holds and, when it
-- holds fewer than N, why. Owner: corpus_audit/tables/subsets.py
--   candidates: captions ranked (samples rows); available: captions the strategy could rank
--   (the occupation's captions; labelled 'none' for the no-indicator strategies);
--   members / labelled: captions in the subset and how many have a female/male label;
--   pending: scanned candidates whose image is not filtered or labelled yet.
-- shortfall (NULL when the subset is full, or for a split no_indicators subset, which has no
-- N of its own): pending (run `label`) | no_images (labelled_images: none of its candidates
-- has a registered training image: run `images`) | candidates (every candidate was used but
-- the corpus has more captions: raise select.overdraw) | corpus (no more captions).
WITH per_subset AS (
    SELECT
        strategy, occupation, prompt_id,
        any_value(target) AS target,
        count(*) AS candidates,
        count(*) FILTER (WHERE member) AS members,
        count(*) FILTER (WHERE member AND state IN ('female', 'male')) AS labelled,
        count(*) FILTER (WHERE scanned AND state = 'pending') AS pending,
        count(*) FILTER (WHERE scanned AND image_id IS NOT NULL) AS images
    FROM subset_members
    GROUP BY strategy, occupation, prompt_id
),
available AS (
    SELECT m.occupation,
           count(DISTINCT m.caption_id) AS all_captions,
           count(DISTINCT m.caption_id) FILTER (WHERE i.label = 'none') AS none_captions
    FROM mentions m
    LEFT JOIN indicators i ON i.caption_id = m.caption_id
    GROUP BY m.occupation
)
SELECT
    p.*,
    CASE WHEN p.strategy IN ('no_indicators', 'nn_no_indicators') THEN a.none_captions
         ELSE a.all_captions END AS available,
    CASE
        WHEN p.target IS NULL THEN NULL
        WHEN (CASE WHEN $unit = 'captions' THEN p.members ELSE p.labelled END) >= p.target
            THEN NULL
        WHEN p.pending > 0 THEN 'pending'
        WHEN $unit <> 'captions' AND p.images = 0 THEN 'no_images'
        WHEN $unit <> 'captions' AND p.candidates < coalesce(
            CASE WHEN p.strategy IN ('no_indicators', 'nn_no_indicators') THEN a.none_captions
                 ELSE a.all_captions END, 0) THEN 'candidates'
        ELSE 'corpus'
    END AS shortfall
FROM per_subset p
LEFT JOIN available a USING (occupation)
ORDER BY p.strategy, p.occupation, p.prompt_id;
