-- Report: the $n occupations with the most `nn` sample rows (ties by name).
-- Reads `samples`. Owner: corpus_audit/report/context.py
SELECT occupation, count(*) AS n
FROM samples
WHERE strategy = 'nn'
GROUP BY occupation
ORDER BY n DESC, occupation
LIMIT $n;
