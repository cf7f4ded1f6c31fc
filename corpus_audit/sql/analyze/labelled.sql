-- Images that passed the filters, with the binary perceived-gender label the analysis uses
-- (METHODS 1.4). Owner: corpus_audit/stages/analyze/percent.py
--
-- An image counts when it has a label from classifier $classifier and its face_filter row
-- (if any; the label stage labels only kept images) says kept. $threshold = 0 uses the stored
-- label; a threshold in [0.5, 1] relabels from p_female: female when p_female >= threshold,
-- male when 1 - p_female >= threshold, else ambiguous (p_female = 0.5 is always ambiguous).
CREATE OR REPLACE TEMP TABLE analysis_labelled AS
SELECT
    l.image_id,
    CASE
        WHEN $threshold = 0 THEN l.label
        WHEN l.p_female >= $threshold AND l.p_female > 0.5 THEN 'female'
        WHEN 1 - l.p_female >= $threshold AND l.p_female < 0.5 THEN 'male'
        ELSE 'ambiguous'
    END AS label
FROM labels l
LEFT JOIN face_filter f USING (image_id)
WHERE l.classifier = $classifier
  AND coalesce(f.kept, TRUE);
