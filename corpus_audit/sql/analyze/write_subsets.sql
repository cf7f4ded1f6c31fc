-- Store the training subsets after the cut: the member rows of the temp table subset_members
-- (subsets/cut.sql). Run inside the `analyze` transaction, after `training_subsets` was
-- emptied. Owner: corpus_audit/stages/analyze/__init__.py
INSERT INTO training_subsets
SELECT strategy, occupation, prompt_id, caption_id, rank, image_id, state
FROM subset_members
WHERE member;
