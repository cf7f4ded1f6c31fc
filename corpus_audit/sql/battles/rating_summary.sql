-- `battles import`'s printed summary: per aspect, the models in rank order with their battles,
-- Elo median and interval and Bradley-Terry rating (one decimal).
SELECT aspect, rank, model_id, n_battles,
       round(elo_median, 1) AS elo_median,
       round(elo_ci_low, 1) AS elo_low,
       round(elo_ci_high, 1) AS elo_high,
       round(bt_rating, 1) AS bradley_terry
FROM preference_ratings
ORDER BY aspect, rank;
