-- The report's marked words: the first $shown (rank) of each model, comparison, scope, occupation,
-- side (model NULL except for LLM texts).
SELECT model, comparison, scope, occupation, side, rank, word, z, count_female, count_male,
       texts_female, texts_male, examples
FROM texts_marked_words
WHERE rank <= $shown
ORDER BY model NULLS FIRST, comparison, scope, occupation, side, rank;
