-- Report: the generated-side %female rows of the template prompts (template_id 0, captions
-- as prompts, left out). Reads `percent_female`. Owner: corpus_audit/report/context.py
SELECT * FROM percent_female
WHERE side = 'generated' AND template_id <> 0
ORDER BY model_id, template_id;
