-- The training subsets after the cut (METHODS 1.5). Owner: corpus_audit/tables/subsets.py
-- Reads `samples` (the ranked candidates of every subset), the training `images`, `face_filter`,
-- `indicators` and the temp table `analysis_labelled` (image_id, label: the labels the
-- analysis uses, sql/analyze/labelled.sql). Writes two temp tables:
--
-- subset_candidates: every ranked candidate with the state of its training image:
--   female | male (passed the face filter, confident label) | ambiguous (label below the
--   threshold) | dropped (face filter: no_face, many_faces, small_face, unreadable) |
--   no_image (no training image registered) | pending (registered, not filtered or labelled
--   yet: run `label`).
-- subset_members: the same rows with
--   scanned: the cut went through this candidate (captions unit: rank <= N; labelled_images:
--            up to and including the N-th labelled one, all of them when fewer);
--   member:  the caption is in the subset (captions unit: rank <= N; labelled_images: one of
--            the first N candidates with a female/male label, in rank order).
-- N is $n_occupation (select.sample_size) for per-occupation subsets (prompt_id NULL) and
-- $n_prompt (neighbors.k) for per-prompt ones. With $split (indicators.no_indicator_sample =
-- 'split') a no_indicators subset takes its flags from the keyword subset of its occupation:
-- it is the indicator-free part of the keyword subset after the cut, not a cut of its own.
CREATE OR REPLACE TEMP TABLE subset_candidates AS
SELECT
    s.strategy,
    s.occupation,
    s.prompt_id,
    s.caption_id,
    s.rank,
    i.image_id,
    CASE
        WHEN a.label IN ('female', 'male', 'ambiguous') THEN a.label
        WHEN f.image_id IS NOT NULL AND NOT f.kept THEN 'dropped'
        WHEN i.image_id IS NULL THEN 'no_image'
        ELSE 'pending'
    END AS state,
    CASE WHEN s.prompt_id IS NULL THEN $n_occupation ELSE $n_prompt END AS target
FROM samples s
LEFT JOIN (
    SELECT caption_id, min(image_id) AS image_id
    FROM images WHERE source = 'training' AND caption_id IS NOT NULL
    GROUP BY caption_id
) i ON i.caption_id = s.caption_id
LEFT JOIN face_filter f ON f.image_id = i.image_id
LEFT JOIN analysis_labelled a ON a.image_id = i.image_id;

CREATE OR REPLACE TEMP TABLE subset_members AS
WITH counted AS (
    SELECT
        *,
        count(*) FILTER (WHERE state IN ('female', 'male')) OVER w AS labelled_through
    FROM subset_candidates
    WINDOW w AS (PARTITION BY strategy, occupation, prompt_id ORDER BY rank
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
flagged AS (
    SELECT
        strategy, occupation, prompt_id, caption_id, rank, image_id, state, target,
        CASE WHEN $unit = 'captions' THEN rank <= target
             ELSE labelled_through - (state IN ('female', 'male'))::INTEGER < target
        END AS scanned,
        CASE WHEN $unit = 'captions' THEN rank <= target
             ELSE state IN ('female', 'male') AND labelled_through <= target
        END AS member
    FROM counted
)
SELECT
    f.strategy, f.occupation, f.prompt_id, f.caption_id, f.rank, f.image_id, f.state,
    CASE WHEN $split AND f.strategy = 'no_indicators' THEN NULL ELSE f.target END AS target,
    CASE WHEN $split AND f.strategy = 'no_indicators' THEN coalesce(k.scanned, FALSE)
         ELSE f.scanned END AS scanned,
    CASE WHEN $split AND f.strategy = 'no_indicators' THEN coalesce(k.member, FALSE)
         ELSE f.member END AS member
FROM flagged f
LEFT JOIN flagged k
       ON $split AND f.strategy = 'no_indicators'
      AND k.strategy = 'keyword' AND k.occupation = f.occupation AND k.caption_id = f.caption_id;
