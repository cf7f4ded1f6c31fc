-- Report: the training subsets that fall short of N after the cut (comparability section).
-- Reads `percent_female`. Owner: corpus_audit/report/context.py
SELECT p.strategy, p.occupation, p.template_id, p.n_female + p.n_male AS labelled,
       p.n_captions, p.n_target, p.n_candidates, p.shortfall
FROM percent_female p
WHERE p.side = 'training' AND p.model_id IS NULL AND p.shortfall IS NOT NULL
ORDER BY p.strategy, p.occupation, p.template_id NULLS FIRST;
