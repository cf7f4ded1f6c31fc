-- Report: caption-prompt similarity per selection strategy (mean, min, max over its subsets;
-- subsets short of k). Reads `similarity_diagnostics`. Owner: corpus_audit/report/context.py
SELECT strategy,
       count(DISTINCT occupation) AS occupations,
       count(*) AS subsets,
       avg(mean_similarity) AS mean_similarity,
       min(mean_similarity) AS min_similarity,
       max(mean_similarity) AS max_similarity,
       count(*) FILTER (WHERE short_of_k) AS short_of_k
FROM similarity_diagnostics
GROUP BY strategy;
