-- The prompt templates that have an amplification summary (the columns of Table 3).
-- Reads `amplification_summary`. Owner: corpus_audit/tables/read.py
SELECT DISTINCT template_id
FROM amplification_summary
WHERE template_id IS NOT NULL
ORDER BY 1;
