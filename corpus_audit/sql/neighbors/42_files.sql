-- neighbors, step 4c: the cache parts this study's vectors live in, with their sizes.
-- $parts: a list of structs {path, ids_path, n_rows, dim} for the parts in use.
DELETE FROM embedding_files WHERE model_id = $model;
INSERT INTO embedding_files (model_id, kind, path, ids_path, n_rows, dim)
SELECT $model, 'cache_part', p.path, p.ids_path, p.n_rows, p.dim
FROM (SELECT unnest($parts, recursive := true)) p;
