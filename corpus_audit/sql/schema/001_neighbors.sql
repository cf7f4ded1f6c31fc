-- Tables of the `neighbors` stage (SBERT + FAISS). Owner: corpus_audit/stages/neighbors.py
-- model_id everywhere is the embedder fingerprint, e.g. 'all-MiniLM-L6-v2-bf16-3f9c0a1b2c4d'
-- (model identity + precision + max_seq_length; see corpus_audit/backends/embeddings.py).
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

-- Parts of the content-addressed embedding cache that hold this study's vectors.
CREATE TABLE IF NOT EXISTS embedding_files (
    model_id     VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,           -- cache_part
    path         VARCHAR NOT NULL,           -- .npy file (float32 (n_rows, dim), rows L2-normalised)
    ids_path     VARCHAR NOT NULL,           -- .keys.parquet beside it: key = md5(text), row
    n_rows       BIGINT NOT NULL,
    dim          INTEGER NOT NULL
);

-- Where the vector of each caption in `mentions` lives (keyed by caption_id and model).
CREATE TABLE IF NOT EXISTS caption_embeddings (
    model_id     VARCHAR NOT NULL,
    caption_id   BIGINT NOT NULL,
    text_md5     VARCHAR NOT NULL,           -- md5 of the caption text: the cache key
    path         VARCHAR NOT NULL,           -- .npy part (absolute path)
    "row"        INTEGER NOT NULL            -- 0-based row in that part
);

-- Where the vector of each prompt lives.
CREATE TABLE IF NOT EXISTS prompt_embeddings (
    model_id     VARCHAR NOT NULL,
    prompt_id    VARCHAR NOT NULL,
    text_md5     VARCHAR NOT NULL,
    path         VARCHAR NOT NULL,
    "row"        INTEGER NOT NULL
);

-- Mean pairwise cosine similarity between a subset's captions and its prompt.
-- One row per (strategy, occupation, prompt). keyword / no_indicators subsets do not depend
-- on the prompt: each of the occupation's prompts gets a row over the same captions.
CREATE TABLE IF NOT EXISTS similarity_diagnostics (
    strategy         VARCHAR NOT NULL,       -- keyword | no_indicators | nn | nn_no_indicators
    occupation       VARCHAR NOT NULL,
    prompt_id        VARCHAR NOT NULL,
    n_captions       INTEGER NOT NULL,
    mean_similarity  DOUBLE,                 -- in [-1, 1]; NULL when n_captions = 0
    short_of_k       BOOLEAN,                -- fewer captions than wanted (nn: k; others: select.sample_size)
    recall_at_k      DOUBLE,                 -- nn with an approximate index: recall vs exact; else NULL
    model_id         VARCHAR                 -- embedder fingerprint
);

-- Finished occupations of the `neighbors` stage: a rerun skips an occupation whose signature
-- (config, embedder, inputs) is unchanged; a changed one is recomputed in one transaction.
CREATE TABLE IF NOT EXISTS neighbors_progress (
    occupation       VARCHAR PRIMARY KEY,
    signature        VARCHAR NOT NULL,
    model_id         VARCHAR NOT NULL,
    n_captions       INTEGER NOT NULL,
    n_no_indicators  INTEGER NOT NULL,
    n_prompts        INTEGER NOT NULL,
    index_kind       VARCHAR,                -- flat | ivf | hnsw (NULL without captions)
    index_path       VARCHAR,                -- FAISS index of the occupation's captions
    finished_at      TIMESTAMP
);
