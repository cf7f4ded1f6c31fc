-- Tables of the `images` stage. Owner: corpus_audit/stages/images.py. `images` also holds the
-- generated images (rows with source = 'generated', owned by `generate`).
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

-- Every training or generated image the study knows.
CREATE TABLE IF NOT EXISTS images (
    image_id     VARCHAR PRIMARY KEY,        -- 'train:<caption_id>' or 'gen:<model>:<prompt_id>:<seed>' style
    source       VARCHAR NOT NULL,           -- training | generated
    caption_id   BIGINT,                     -- training images; generated from captions-as-prompts
    prompt_id    VARCHAR,                    -- generated images from a prompt set
    occupation   VARCHAR,
    path         VARCHAR NOT NULL,           -- file path, relative to the study dir when inside it
    model_id     VARCHAR,                    -- generator (generated images)
    prompt_text  VARCHAR,                    -- the exact text given to the generator
    seed         BIGINT,                     -- per-image seed (generated images)
    nsfw         BOOLEAN,                    -- safety checker flag, NULL when the pipeline has none
    strategy     VARCHAR,                    -- captions-as-prompts subset, when applicable
    created_at   TIMESTAMP DEFAULT CAST(current_timestamp AS TIMESTAMP),
    origin       VARCHAR                     -- training: where the bytes came from (shard:member, url, file)
);

-- Items of an image source the `images` stage could not use (unsafe tar member names,
-- unreadable shards, failed downloads...), one row each. Unmatched records are only counted.
CREATE TABLE IF NOT EXISTS image_skips (
    source       VARCHAR NOT NULL,           -- 'sources[i]:<kind>'
    item         VARCHAR NOT NULL,           -- file, shard:member or row reference
    reason       VARCHAR NOT NULL,           -- unsafe_name | not_a_file | unreadable_shard | ...
    detail       VARCHAR
);

-- Shards / files of a source already registered (the `images` stage skips them on rerun).
CREATE TABLE IF NOT EXISTS image_shards (
    source       VARCHAR NOT NULL,
    shard        VARCHAR NOT NULL,           -- absolute path of the shard/file/dataset
    records      BIGINT,                     -- image records seen in it
    registered   BIGINT,                     -- of which linked to a wanted caption and added
    finished_at  TIMESTAMP
);

-- img2dataset's per-shard statistics (<shard>_stats.json), kept as written.
CREATE TABLE IF NOT EXISTS download_stats (
    source              VARCHAR NOT NULL,
    shard               VARCHAR NOT NULL,
    count               BIGINT,
    successes           BIGINT,
    failed_to_download  BIGINT,
    failed_to_resize    BIGINT,
    status_dict         VARCHAR              -- JSON {error message: count}
);
