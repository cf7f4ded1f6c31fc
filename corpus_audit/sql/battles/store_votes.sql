-- battles import: the votes read from the annotators' CSVs (temp view _battle_votes_in). A
-- vote on the same (pair, aspect) by the same annotator replaces the stored one (a corrected
-- sheet imported again); votes on other pairs are kept.
INSERT OR REPLACE INTO battles
SELECT pair_id, prompt_id, model_a, model_b, image_a, image_b, aspect, vote, annotator,
       source_file, line
FROM _battle_votes_in;
