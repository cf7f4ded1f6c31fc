-- Report: up to $n generated images of $occupation per model, labelled ones first, in a fixed
-- pseudo-random order; label as in report/thumbs_training.sql ($classifier).
-- Reads `images`, `prompts`, `labels`, `face_filter`. Owner: corpus_audit/report/context.py
SELECT * FROM (
    SELECT i.image_id, i.path, coalesce(i.model_id, 'unknown') AS model_id,
           coalesce(l.label, f.reason, 'unlabelled') AS label, i.prompt_text AS title,
           row_number() OVER (PARTITION BY i.model_id
                              ORDER BY l.label IS NULL, hash(i.image_id)) AS k
    FROM images i
    LEFT JOIN prompts p ON p.prompt_id = i.prompt_id
    LEFT JOIN labels l ON l.image_id = i.image_id AND l.classifier = $classifier
    LEFT JOIN face_filter f ON f.image_id = i.image_id
    WHERE i.source = 'generated' AND coalesce(i.occupation, p.occupation) = $occupation
) WHERE k <= $n ORDER BY model_id, k;
