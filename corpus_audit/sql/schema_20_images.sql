-- Tables of the image side: sources, face filter, perceived-gender labels.
-- Owners: corpus_audit/images.py, corpus_audit/generate.py, corpus_audit/label.py

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

-- Face filter outcome per image (METHODS 1.4 step 1).
CREATE TABLE IF NOT EXISTS face_filter (
    image_id     VARCHAR PRIMARY KEY,
    detector     VARCHAR NOT NULL,           -- e.g. 'mediapipe:full_range'
    n_faces      INTEGER,                    -- faces with score >= min confidence; NULL if unreadable
    kept         BOOLEAN NOT NULL,
    reason       VARCHAR,                    -- NULL when kept; no_face | many_faces | small_face | unreadable
    kept_face    INTEGER,                    -- faces.face_index of the face that passed (NULL when dropped)
    image_width  INTEGER,                    -- pixels (NULL when unreadable)
    image_height INTEGER,
    detail       VARCHAR                     -- why an image is unreadable (e.g. 'truncated image data')
);

-- Detected faces, ordered left to right (face_index 0 = leftmost). Box in pixels.
CREATE TABLE IF NOT EXISTS faces (
    image_id     VARCHAR NOT NULL,
    face_index   INTEGER NOT NULL,
    x            DOUBLE, y DOUBLE, w DOUBLE, h DOUBLE,
    score        DOUBLE,
    image_width  INTEGER,
    image_height INTEGER
);

-- Perceived-gender classification of images that passed the face filter.
CREATE TABLE IF NOT EXISTS labels (
    image_id     VARCHAR NOT NULL,
    classifier   VARCHAR NOT NULL,           -- e.g. 'agegender', 'clip:ViT-L-14/openai'
    p_female     DOUBLE NOT NULL,            -- in [0, 1]; p_male = 1 - p_female
    label        VARCHAR NOT NULL,           -- male | female | ambiguous
    threshold    DOUBLE NOT NULL,
    PRIMARY KEY (image_id, classifier)
);
-- Labels at another threshold t in [0.5, 1], without rerunning a model:
--   CASE WHEN p_female >= t AND p_female > 0.5 THEN 'female'
--        WHEN 1 - p_female >= t AND p_female < 0.5 THEN 'male' ELSE 'ambiguous' END

-- Human validation labels (validate import).
CREATE TABLE IF NOT EXISTS human_labels (
    image_id     VARCHAR NOT NULL,
    annotator    VARCHAR NOT NULL,
    label        VARCHAR NOT NULL,           -- male | female | unsure
    source_file  VARCHAR                     -- the CSV it came from (a re-import replaces the annotator)
);

-- The sample of the latest `validate export` (item numbers as on the sheet).
CREATE TABLE IF NOT EXISTS validation_items (
    item         INTEGER NOT NULL,           -- 1-based, as printed on the sheet
    image_id     VARCHAR NOT NULL,
    classifier   VARCHAR NOT NULL,           -- whose labels the sample was stratified by
    stratum      VARCHAR NOT NULL            -- '<source>/<label>'
);

-- Paraphrased captions used as prompts. One row per (caption, occupation, paraphraser): the
-- instruction names the occupation word to keep. Owner: corpus_audit/generate.py
CREATE TABLE IF NOT EXISTS paraphrases (
    caption_id   BIGINT NOT NULL,
    paraphraser  VARCHAR NOT NULL,           -- '<backend>:<model>', e.g. 'transformers:google/flan-t5-large'
    text         VARCHAR NOT NULL,           -- the paraphrase ('' when the model returned nothing)
    contains_occupation BOOLEAN,             -- FALSE: the model lost the occupation word
    occupation   VARCHAR                     -- the occupation the caption was sampled for
);
