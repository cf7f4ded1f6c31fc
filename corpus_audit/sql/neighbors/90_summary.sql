-- neighbors: per strategy, the mean caption-prompt cosine similarity over (occupation, prompt)
-- subsets with captions (the paper, LAION: keyword 0.385, nn 0.704), with counts; short_of_k
-- counts subsets that have captions but fewer than wanted.
SELECT strategy,
       count(DISTINCT occupation) FILTER (WHERE n_captions > 0) AS occupations,
       count(*) FILTER (WHERE n_captions > 0) AS subsets,
       round(avg(n_captions) FILTER (WHERE n_captions > 0), 1) AS mean_captions,
       round(avg(mean_similarity), 4) AS mean_similarity,
       count(*) FILTER (WHERE short_of_k AND n_captions > 0) AS short_of_k,
       round(avg(recall_at_k), 4) AS recall_at_k
FROM similarity_diagnostics
GROUP BY strategy
ORDER BY list_position(['keyword', 'no_indicators', 'nn', 'nn_no_indicators'], strategy),
         strategy;
