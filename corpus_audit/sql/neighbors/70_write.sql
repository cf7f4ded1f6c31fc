-- neighbors, per occupation, inside one transaction: replace its nn / nn_no_indicators
-- samples and its similarity diagnostics with the new ones (registered as _nb_new_samples and
-- _nb_new_diag), and mark it finished.
DELETE FROM samples WHERE occupation = $occupation AND strategy IN ('nn', 'nn_no_indicators');
INSERT INTO samples (strategy, occupation, prompt_id, caption_id, rank, score)
SELECT strategy, $occupation, prompt_id, caption_id, rank, score FROM _nb_new_samples;
DELETE FROM similarity_diagnostics WHERE occupation = $occupation;
INSERT INTO similarity_diagnostics
    (strategy, occupation, prompt_id, n_captions, mean_similarity, short_of_k, recall_at_k, model_id)
SELECT strategy, $occupation, prompt_id, n_captions, mean_similarity, short_of_k, recall_at_k, $model
FROM _nb_new_diag;
DELETE FROM neighbors_progress WHERE occupation = $occupation;
INSERT INTO neighbors_progress VALUES
    ($occupation, $signature, $model, $n_captions, $n_none, $n_prompts, $index_kind, $index_path,
     CAST(current_timestamp AS TIMESTAMP));
