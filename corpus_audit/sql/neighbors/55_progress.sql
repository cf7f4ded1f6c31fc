-- For `status`: occupations of the temp table _nb_inputs (neighbors/50_inputs.sql) finished
-- with their current signature, and all of them. Reads `neighbors_progress`.
-- Owner: corpus_audit/stages/neighbors.py
SELECT count(p.occupation), count(*)
FROM _nb_inputs i
LEFT JOIN neighbors_progress p ON p.occupation = i.occupation AND p.signature = i.signature;
