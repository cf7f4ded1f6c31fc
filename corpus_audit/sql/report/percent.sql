-- Report: every %female row (training and generated), for the report's full table.
-- Reads `percent_female`. Owner: corpus_audit/report/context.py
SELECT * FROM percent_female
ORDER BY side, model_id NULLS FIRST, strategy NULLS FIRST, occupation, template_id NULLS FIRST;
