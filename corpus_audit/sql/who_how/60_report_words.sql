-- The report's marked words: the first $1 (rank) of each comparison, scope, occupation, side.
SELECT comparison, scope, occupation, side, rank, word, z, count_female, count_male,
       texts_female, texts_male, examples
FROM texts_marked_words
WHERE rank <= $1
ORDER BY comparison, scope, occupation, side, rank;
