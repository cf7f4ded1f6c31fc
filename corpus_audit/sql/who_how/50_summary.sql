-- What `corpus-audit who_how` / `texts` prints: per comparison and occupation with texts on
-- both sides (pooled last; LLM texts: per model, named before the occupation), the texts compared and the three strongest marked words a side.
SELECT s.comparison,
       coalesce(s.model || ': ', '') || coalesce(s.occupation, '(pooled)') AS occupation,
       s.texts_female, s.texts_male, s.marked_female, s.marked_male,
       (SELECT string_agg(w.word, ', ' ORDER BY w.rank) FROM texts_marked_words w
         WHERE w.comparison = s.comparison AND w.scope = s.scope
           AND w.occupation IS NOT DISTINCT FROM s.occupation
           AND w.model IS NOT DISTINCT FROM s.model
           AND w.side = 'female' AND w.rank <= 3) AS top_female,
       (SELECT string_agg(w.word, ', ' ORDER BY w.rank) FROM texts_marked_words w
         WHERE w.comparison = s.comparison AND w.scope = s.scope
           AND w.occupation IS NOT DISTINCT FROM s.occupation
           AND w.model IS NOT DISTINCT FROM s.model
           AND w.side = 'male' AND w.rank <= 3) AS top_male
FROM texts_marked_summary s
WHERE s.compared
ORDER BY s.model NULLS FIRST, s.comparison, s.scope = 'pooled', s.occupation;
