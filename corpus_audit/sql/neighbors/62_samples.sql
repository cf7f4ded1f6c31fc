-- neighbors, per occupation: the keyword and no_indicators samples (for the diagnostics).
SELECT strategy, caption_id
FROM samples
WHERE occupation = $occupation AND strategy IN ('keyword', 'no_indicators')
ORDER BY strategy, rank;
