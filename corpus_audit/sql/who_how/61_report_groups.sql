-- The report's comparisons: pooled first, then the $shown occupations with the most texts
-- compared (both sides), per model (NULL except for LLM texts) and comparison.
SELECT model, comparison, scope, occupation, texts_female, texts_male, tokens_female, tokens_male,
       significant, removed_by_calibration, marked_female, marked_male
FROM (
    SELECT *, row_number() OVER (
        PARTITION BY model, comparison, scope
        ORDER BY texts_female + texts_male DESC, occupation
    ) AS k
    FROM texts_marked_summary
    WHERE texts_female > 0 AND texts_male > 0
)
WHERE scope = 'pooled' OR k <= $shown
ORDER BY model NULLS FIRST, comparison, scope = 'occupation', texts_female + texts_male DESC,
         occupation;
