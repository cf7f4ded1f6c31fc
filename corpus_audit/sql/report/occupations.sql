-- Report: every occupation the study has rows for (samples, images, %female), by name.
-- Reads `samples`, `images`, `percent_female`. Owner: corpus_audit/report/context.py
SELECT occupation FROM samples
UNION SELECT occupation FROM images WHERE occupation IS NOT NULL
UNION SELECT occupation FROM percent_female
ORDER BY occupation;
