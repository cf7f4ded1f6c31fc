-- `pst_analyze`'s printed summary: the overall stereotype score (SS) of each side, prompt kind
-- and caption variant, with its interval (one decimal).
SELECT side, kind, variant, n_classified,
       round(ss, 1) AS ss,
       round(ci_low, 1) AS ci_low,
       round(ci_high, 1) AS ci_high
FROM pst_scores
WHERE scope = 'overall'
ORDER BY side DESC, kind, variant;
