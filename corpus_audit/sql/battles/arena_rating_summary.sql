-- `battles import`'s printed summary for arena files: per aspect over all languages, the models
-- in rank order with their battles, Elo median and interval and Bradley-Terry rating.
SELECT aspect, rank, model_id, n_battles,
       round(elo_median, 1) AS elo_median,
       round(elo_ci_low, 1) AS elo_low,
       round(elo_ci_high, 1) AS elo_high,
       round(bt_rating, 1) AS bradley_terry,
       round(bt_ci_low, 1) AS bt_low,
       round(bt_ci_high, 1) AS bt_high
FROM arena_ratings
WHERE language = 'all'
ORDER BY aspect, rank, bt_rating DESC;
