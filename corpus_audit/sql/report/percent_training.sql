-- Report: the training-side %female rows of the template prompts' subsets (model_id NULL).
-- Reads `percent_female`. Owner: corpus_audit/report/context.py
SELECT * FROM percent_female
WHERE side = 'training' AND model_id IS NULL
ORDER BY strategy, template_id NULLS FIRST;
