-- neighbors, step 2: which of those texts the embedding cache already holds. $files lists the
-- cache's committed key files (part-*.keys.parquet); a key in two parts (two processes
-- embedded it at once, same vector) takes the first part by name.
CREATE OR REPLACE TEMP TABLE _nb_found AS
SELECT p.key,
       regexp_replace(min(p.filename), '\.keys\.parquet$', '.npy') AS path,
       arg_min(p."row", p.filename) AS "row"
FROM read_parquet($files, filename = true) p
WHERE p.key IN (SELECT key FROM _nb_texts)
GROUP BY p.key;
