-- Report: caption-prompt similarity of every subset with its prompt template.
-- Reads `similarity_diagnostics`, `prompts`. Owner: corpus_audit/report/context.py
SELECT d.*, p.template_id
FROM similarity_diagnostics d
LEFT JOIN prompts p USING (prompt_id)
ORDER BY occupation, strategy, template_id;
