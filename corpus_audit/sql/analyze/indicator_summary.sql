-- The CLI summary of the caption-side indicator shares when there are no amplification rows:
-- occupations with captions, most captions first. Reads `occupation_indicators`.
-- Owner: corpus_audit/stages/analyze/__init__.py
SELECT occupation, n_captions AS captions, pct_any, pct_male, pct_female, pct_both
FROM occupation_indicators
WHERE n_captions > 0
ORDER BY n_captions DESC, occupation;
