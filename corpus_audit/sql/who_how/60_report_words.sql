-- The report's marked words: the first $1 (rank) of each model, comparison, scope, occupation,
-- side (model NULL except for LLM texts).
SELECT model, comparison, scope, occupation, side, rank, word, z, count_female, count_male,
       texts_female, texts_male, examples
FROM texts_marked_words
WHERE rank <= $1
ORDER BY model NULLS FIRST, comparison, scope, occupation, side, rank;
