-- battles export: add the drawn pairs to the manifest of every export (a pair_id depends on
-- its two images only, so a pair drawn again is already there and is kept as it was).
INSERT INTO battle_pairs
SELECT pair_id, prompt_id, prompt_text, model_a, model_b, image_a, image_b, path_a, path_b,
       now()::TIMESTAMP
FROM _battle_pairs_in
ON CONFLICT (pair_id) DO NOTHING;
