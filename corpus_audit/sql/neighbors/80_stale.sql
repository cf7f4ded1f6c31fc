-- neighbors: occupations that have results but are no longer among the inputs (the lexicon or
-- the prompt set changed) lose their nn rows, diagnostics and progress.
DELETE FROM samples
WHERE strategy IN ('nn', 'nn_no_indicators')
  AND occupation NOT IN (SELECT occupation FROM _nb_inputs);
DELETE FROM similarity_diagnostics WHERE occupation NOT IN (SELECT occupation FROM _nb_inputs);
DELETE FROM neighbors_progress WHERE occupation NOT IN (SELECT occupation FROM _nb_inputs);
