-- Report: the top $n `nn` captions of each prompt of the $occupations (a list), with the
-- caption's indicator label. Reads `samples`, `prompts`, `captions`, `indicators`.
-- Owner: corpus_audit/report/context.py
SELECT s.occupation, p.template_id, p.text AS prompt, s.rank, s.score, c.text,
       d.label AS indicator
FROM samples s
JOIN prompts p USING (prompt_id)
JOIN captions c USING (caption_id)
LEFT JOIN indicators d USING (caption_id)
WHERE s.strategy = 'nn' AND s.rank <= $n AND list_contains($occupations, s.occupation)
ORDER BY s.occupation, p.template_id, s.rank;
