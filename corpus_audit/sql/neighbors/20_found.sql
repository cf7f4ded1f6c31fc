-- neighbors, step 2: which of those texts the embedding cache already holds. _nb_key_rows holds
-- the rows of the cache's committed key files (part-*.keys.parquet) for those texts, read by
-- neighbors._find_cached; a key in two parts (two processes embedded it at once, same vector)
-- takes the first part by name.
CREATE OR REPLACE TEMP TABLE _nb_found AS
SELECT p.key,
       regexp_replace(min(p.filename), '\.keys\.parquet$', '.npy') AS path,
       arg_min(p."row", p.filename) AS "row"
FROM _nb_key_rows p
GROUP BY p.key;
