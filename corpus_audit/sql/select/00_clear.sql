-- select, step 0: forget what an earlier `select` run wrote.
-- Runs inside the same transaction as the new results, so a run that fails later rolls back
-- to the old rows. Rows of other stages (indicators, other sampling strategies) are left alone.
DELETE FROM samples WHERE strategy = 'keyword';
DELETE FROM mentions;
DELETE FROM captions;
DELETE FROM corpus_files;
DELETE FROM prompts;
DELETE FROM prompt_categories;
