-- Tables of the `neighbors` stage (SBERT + FAISS). Owner: corpus_audit/neighbors.py

-- Where caption/prompt embeddings are cached (one row per cached matrix file).
CREATE TABLE IF NOT EXISTS embedding_files (
    model_id     VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,           -- caption | prompt
    path         VARCHAR NOT NULL,           -- .npy file (float32, L2-normalised) beside the study
    ids_path     VARCHAR NOT NULL,           -- .npy of int64 caption ids / prompt ids row order
    n_rows       BIGINT NOT NULL,
    dim          INTEGER NOT NULL
);

-- Mean pairwise cosine similarity between a subset's captions and its prompt.
CREATE TABLE IF NOT EXISTS similarity_diagnostics (
    strategy         VARCHAR NOT NULL,
    occupation       VARCHAR NOT NULL,
    prompt_id        VARCHAR NOT NULL,
    n_captions       INTEGER NOT NULL,
    mean_similarity  DOUBLE,                 -- NULL when n_captions = 0
    short_of_k       BOOLEAN                 -- fewer captions than k were available
);
