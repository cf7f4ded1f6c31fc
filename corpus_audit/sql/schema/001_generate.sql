-- Tables of the `generate` stage beside its `images` rows (schema/001_images.sql).
-- Owner: corpus_audit/stages/generate.py
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

-- Paraphrased captions used as prompts. One row per (caption, occupation, paraphraser): the
-- instruction names the occupation word to keep. Owner: corpus_audit/stages/generate.py
CREATE TABLE IF NOT EXISTS paraphrases (
    caption_id   BIGINT NOT NULL,
    paraphraser  VARCHAR NOT NULL,           -- '<backend>:<model>', e.g. 'transformers:google/flan-t5-large'
    text         VARCHAR NOT NULL,           -- the paraphrase ('' when the model returned nothing)
    contains_occupation BOOLEAN,             -- FALSE: the model lost the occupation word
    occupation   VARCHAR                     -- the occupation the caption was sampled for
);

-- The settings a set of generated images was made with. With images.prompt_text and
-- images.seed they regenerate one image exactly (corpus_audit.stages.generate.regenerate_image).
CREATE TABLE IF NOT EXISTS generation_settings (
    settings_id    VARCHAR PRIMARY KEY,      -- 16 hex digits of sha256(details)
    model_id       VARCHAR NOT NULL,         -- as configured (hub id or local path)
    backend        VARCHAR NOT NULL,         -- diffusers
    scheduler      VARCHAR,                  -- scheduler class used, e.g. PNDMScheduler
    steps          INTEGER NOT NULL,
    guidance_scale DOUBLE NOT NULL,
    height         INTEGER NOT NULL,         -- pixels
    width          INTEGER NOT NULL,         -- pixels
    dtype          VARCHAR NOT NULL,         -- float16 | bfloat16 | float32
    device         VARCHAR NOT NULL,         -- cuda | cpu | mps (type only)
    nsfw_policy    VARCHAR NOT NULL,         -- blackout | keep
    details        VARCHAR NOT NULL          -- JSON: the generator's describe() (versions, attention, ...)
);

-- One row per generated image, written in the same transaction as its `images` row.
CREATE TABLE IF NOT EXISTS generated_images (
    image_id     VARCHAR PRIMARY KEY,
    settings_id  VARCHAR NOT NULL,
    prompt_key   VARCHAR NOT NULL,           -- prompt_id | caption:<caption_id> | paraphrase:<p>:<occupation>:<caption_id>
    image_index  INTEGER NOT NULL,           -- 0-based index of the image within its prompt
    n_tokens     INTEGER,                    -- prompt tokens incl. start/end, before truncation
    truncated    BOOLEAN,                    -- longer than the text encoder's context (77 for CLIP): cut
    batch_id     VARCHAR,                    -- the generator call it was made in (same for its batch)
    batch_pos    INTEGER                     -- 0-based position in that call: the batch is replayed
);                                           -- to regenerate bit for bit (numerics depend on batch)
