-- The schema of a "version 0" study (before schema_version existed): the six schema files as
-- they were at commit d17730c, concatenated. tests/test_schema.py builds an old study with it.

-- ==== corpus_audit/sql/schema_00_core.sql at d17730c ====
-- Core tables of a study database. Public interface: documented in README.md ("The study database").

-- One row per finished stage run (status reads the latest per stage).
CREATE TABLE IF NOT EXISTS stage_runs (
    stage        VARCHAR NOT NULL,
    status       VARCHAR NOT NULL,          -- done | skipped
    started_at   TIMESTAMP,                 -- UTC
    finished_at  TIMESTAMP,                 -- UTC
    rows_in      BIGINT,
    rows_out     BIGINT,
    dropped      VARCHAR,                   -- JSON {reason: count}
    provenance   VARCHAR,                   -- JSON: config hash, seeds, model ids, versions
    config_hash  VARCHAR
);

-- One row per stage whose latest run began and did not finish: written when the run starts,
-- removed in the transaction that adds its stage_runs row, and also removed when the run fails
-- before committing anything. A row left here means the run was killed, or failed after
-- committing part of its work: the stage is partial (`status` says so, and the stages that
-- read its tables refuse them until it is rerun).
CREATE TABLE IF NOT EXISTS stage_unfinished (
    stage        VARCHAR PRIMARY KEY,
    started_at   TIMESTAMP                  -- UTC, when the unfinished run began
);

-- Corpus files read by `select`, one row each (file_id is the index in the sorted path list).
CREATE TABLE IF NOT EXISTS corpus_files (
    file_id        INTEGER PRIMARY KEY,
    path           VARCHAR NOT NULL,
    format         VARCHAR NOT NULL,         -- parquet | csv | jsonl | hf
    text_column    VARCHAR NOT NULL,
    url_column     VARCHAR,
    rows_total     BIGINT,
    rows_null_text BIGINT,                   -- null/empty captions: counted and skipped
    rows_bad_text  BIGINT,                   -- undecodable captions: counted and skipped
    sample_key     VARCHAR                   -- the file's part of the sample order key: its name,
                                             -- or the shortest path tail that tells it apart
);
ALTER TABLE corpus_files ADD COLUMN IF NOT EXISTS sample_key VARCHAR;

-- Captions that mention at least one occupation. caption_id = (file_id << 40) | row_in_file,
-- so it does not depend on the order files were given in.
CREATE TABLE IF NOT EXISTS captions (
    caption_id   BIGINT PRIMARY KEY,
    text         VARCHAR NOT NULL,
    url          VARCHAR,
    source_file  VARCHAR NOT NULL,
    row_in_file  BIGINT NOT NULL
);

-- Every (caption, occupation) mention; a caption naming two occupations has two rows.
CREATE TABLE IF NOT EXISTS mentions (
    caption_id    BIGINT NOT NULL,
    occupation    VARCHAR NOT NULL,
    matched_form  VARCHAR NOT NULL           -- the surface form found (lower case), e.g. 'teachers'
);

-- Training subsets per selection strategy. prompt_id is NULL for per-occupation strategies
-- (keyword, no_indicators) and set for per-prompt ones (nn, nn_no_indicators).
CREATE TABLE IF NOT EXISTS samples (
    strategy     VARCHAR NOT NULL,           -- keyword | no_indicators | nn | nn_no_indicators
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,
    caption_id   BIGINT NOT NULL,
    rank         INTEGER NOT NULL,           -- 1-based
    score        DOUBLE                      -- cosine similarity for nn strategies, else NULL
);

-- Explicit gender indicators per caption in `mentions` (METHODS 1.6).
CREATE TABLE IF NOT EXISTS indicators (
    caption_id   BIGINT PRIMARY KEY,
    label        VARCHAR NOT NULL,           -- male | female | both | none
    triggers     VARCHAR NOT NULL            -- human-readable, e.g. 'woman; his; name:John(male)'
);

-- One row per trigger token behind an indicator label.
CREATE TABLE IF NOT EXISTS indicator_triggers (
    caption_id   BIGINT NOT NULL,
    kind         VARCHAR NOT NULL,           -- word | pronoun | name
    token        VARCHAR NOT NULL,           -- as matched (lower case for words, as written for names)
    gender       VARCHAR NOT NULL,           -- male | female
    guess        VARCHAR                     -- gender-guesser's raw answer for names, else NULL
);

-- Prompts of the study's prompt sets (templates x occupations), written by `select`.
CREATE TABLE IF NOT EXISTS prompts (
    prompt_id    VARCHAR PRIMARY KEY,        -- '<set>:<template_id>:<occupation>'
    prompt_set   VARCHAR NOT NULL,
    template_id  INTEGER NOT NULL,           -- 1-based, as in the paper (#1-#4)
    occupation   VARCHAR NOT NULL,
    text         VARCHAR NOT NULL
);

-- ==== corpus_audit/sql/schema_05_indicators.sql at d17730c ====
-- Bookkeeping of the indicators stage (tables `indicators` and `indicator_triggers` are in
-- schema_00_core.sql).

-- One row: the settings the stored labels were made with. When the gender-terms lexicon, the
-- spaCy model (name or version), the NER components, use_names or gender-guesser's version
-- change, the stage relabels every caption. select_fingerprint is the `select` run the text
-- check below last ran against.
CREATE TABLE IF NOT EXISTS indicator_settings (
    fingerprint         VARCHAR NOT NULL,    -- sha256 of `settings`, first 16 hex digits
    settings            VARCHAR NOT NULL,    -- JSON: terms, spaCy model + version, pipes, ...
    select_fingerprint  VARCHAR              -- provenance.fingerprint of that select run
);

-- The text each label was made from (md5), so that a caption whose text changed when
-- `select` was rerun on a changed corpus (caption ids are file index + row) is relabelled.
CREATE TABLE IF NOT EXISTS indicator_texts (
    caption_id   BIGINT PRIMARY KEY,
    text_md5     UHUGEINT NOT NULL           -- md5_number(captions.text)
);

-- ==== corpus_audit/sql/schema_10_neighbors.sql at d17730c ====
-- Tables of the `neighbors` stage (SBERT + FAISS). Owner: corpus_audit/stages/neighbors.py
-- model_id everywhere is the embedder fingerprint, e.g. 'all-MiniLM-L6-v2-bf16-3f9c0a1b2c4d'
-- (model identity + precision + max_seq_length; see corpus_audit/backends/embeddings.py).

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

-- ==== corpus_audit/sql/schema_20_images.sql at d17730c ====
-- Tables of the image side: sources, face filter, perceived-gender labels.
-- Owners: corpus_audit/stages/images.py, corpus_audit/stages/generate.py, corpus_audit/stages/label.py

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
-- instruction names the occupation word to keep. Owner: corpus_audit/stages/generate.py
CREATE TABLE IF NOT EXISTS paraphrases (
    caption_id   BIGINT NOT NULL,
    paraphraser  VARCHAR NOT NULL,           -- '<backend>:<model>', e.g. 'transformers:google/flan-t5-large'
    text         VARCHAR NOT NULL,           -- the paraphrase ('' when the model returned nothing)
    contains_occupation BOOLEAN,             -- FALSE: the model lost the occupation word
    occupation   VARCHAR                     -- the occupation the caption was sampled for
);

-- ==== corpus_audit/sql/schema_25_generate.sql at d17730c ====
-- Tables of the `generate` stage beside `images` (schema_20_images.sql). Owner: corpus_audit/stages/generate.py

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

-- ==== corpus_audit/sql/schema_40_analysis.sql at d17730c ====
-- Tables of the `analyze` stage. Owner: corpus_audit/analysis/
-- The stage rewrites all of them in one transaction; percentages are 0-100, amplification is in
-- percentage points (METHODS 1.7), intervals are at analysis.confidence (default 95 %).

-- %female of a training subset or a generated set, with a Wilson interval.
-- Captions-as-prompts sets: strategy captions_as_prompts[_no_indicators] (paraphrased_captions[...]
-- for paraphrases), template_id 0, model_id set on both sides (the captions a model was
-- prompted with define the training set).
CREATE TABLE IF NOT EXISTS percent_female (
    side         VARCHAR NOT NULL,           -- training | generated
    model_id     VARCHAR,                    -- generated sets
    strategy     VARCHAR,                    -- training subsets
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,
    template_id  INTEGER,
    n_female     INTEGER NOT NULL,
    n_male       INTEGER NOT NULL,
    percent_female DOUBLE,                   -- NULL when n_female + n_male = 0
    ci_low       DOUBLE,
    ci_high      DOUBLE,
    n_images     INTEGER,                    -- images of the set before face filter / labels
                                             -- (training: of the candidates the cut went through)
    n_captions   INTEGER,                    -- training subset / caption-prompt set: its captions
    n_target     INTEGER,                    -- training subset: the N it is cut at (NULL: split)
    n_candidates INTEGER,                    -- training subset: ranked candidate captions
    shortfall    VARCHAR                     -- training subset short of N: pending | candidates
                                             -- (raise select.overdraw) | corpus; NULL when full
);
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_images INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_captions INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_target INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS n_candidates INTEGER;
ALTER TABLE percent_female ADD COLUMN IF NOT EXISTS shortfall VARCHAR;

-- The training subsets after the cut (corpus_audit/stages/subsets.py): one row per caption in a
-- subset, with its training image and that image's label (female | male; with
-- select.sample_unit = 'captions' also ambiguous | dropped | no_image | pending). T is the
-- %female of a subset's female/male rows.
CREATE TABLE IF NOT EXISTS training_subsets (
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,                    -- NULL for per-occupation strategies
    caption_id   BIGINT NOT NULL,
    rank         INTEGER NOT NULL,           -- rank in the subset's candidate list (samples)
    image_id     VARCHAR,
    label        VARCHAR NOT NULL
);

-- Amplification per (model, strategy, occupation, prompt template).
-- template_id 0 = captions as prompts (the captions themselves were the prompts).
CREATE TABLE IF NOT EXISTS amplification (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    template_id  INTEGER NOT NULL,
    training_pf  DOUBLE,
    generated_pf DOUBLE,
    amplification DOUBLE,                    -- |G-50| - |T-50|; NULL when T or G is missing
    excluded     BOOLEAN NOT NULL,
    exclude_reason VARCHAR,                  -- direction_switch | no_training_labels | no_generated_labels
    training_n   INTEGER,                    -- labelled training images behind training_pf
    generated_n  INTEGER                     -- labelled generated images behind generated_pf
);
ALTER TABLE amplification ADD COLUMN IF NOT EXISTS training_n INTEGER;
ALTER TABLE amplification ADD COLUMN IF NOT EXISTS generated_n INTEGER;

-- Mean amplification per (model, strategy, prompt template) and overall (template_id NULL:
-- the mean of the per-prompt means). The paper's Table 3 is this table pivoted.
CREATE TABLE IF NOT EXISTS amplification_summary (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    template_id  INTEGER,                    -- NULL = average over prompts
    n_included   INTEGER NOT NULL,           -- occupations averaged (per prompt); pairs (average)
    n_excluded   INTEGER NOT NULL,
    n_prompts    INTEGER,                    -- average row: prompts with a mean
    mean_amplification DOUBLE,               -- NULL when every occupation was excluded
    ci_low       DOUBLE,                     -- bootstrap percentile interval
    ci_high      DOUBLE,
    t_stat       DOUBLE,                     -- one-sample t-test of mean = 0 (per prompt;
    p_value      DOUBLE                      --   captions-as-prompts average row too)
);

-- CLIP image-image similarity (METHODS 1.5 diagnostics): per (model, strategy, occupation,
-- prompt template) the mean cosine over all (training image, generated image) pairs of the
-- labelled images behind T (the subset after the cut) and G (analysis/image_similarity.py).
CREATE TABLE IF NOT EXISTS image_similarity (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    template_id  INTEGER,
    prompt_id    VARCHAR,                    -- the generated set's prompt
    n_training   INTEGER NOT NULL,
    n_generated  INTEGER NOT NULL,
    mean_cosine  DOUBLE,                     -- in [-1, 1]
    clip_model   VARCHAR NOT NULL            -- the CLIP model id (label.clip_model / _pretrained)
);

-- Captions with a one-sided indicator used as prompts: share of their labelled generated images
-- whose perceived gender matches a reference: the caption's indicator (reference 'indicator'),
-- or the paper's, the perceived gender of the caption's training image ('training_image',
-- captions whose training image is labelled). indicator = the reference's value: male |
-- female | any.
CREATE TABLE IF NOT EXISTS indicator_match (
    model_id     VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,           -- caption | paraphrase (the prompt was its paraphrase)
    reference    VARCHAR,                    -- indicator | training_image (the paper's)
    indicator    VARCHAR NOT NULL,
    n_images     INTEGER NOT NULL,
    n_match      INTEGER NOT NULL,
    percent_match DOUBLE,
    ci_low       DOUBLE,
    ci_high      DOUBLE
);

ALTER TABLE indicator_match ADD COLUMN IF NOT EXISTS reference VARCHAR;

-- Per occupation: indicator labels of the captions that mention it (caption side) and of the
-- captions of its labelled keyword-sample training images (image side).
CREATE TABLE IF NOT EXISTS occupation_indicators (
    occupation   VARCHAR NOT NULL,
    n_captions   INTEGER NOT NULL,           -- captions mentioning it
    n_checked    INTEGER NOT NULL,           -- of those, labelled by the indicators stage
    n_male       INTEGER NOT NULL,
    n_female     INTEGER NOT NULL,
    n_both       INTEGER NOT NULL,
    n_none       INTEGER NOT NULL,
    pct_any      DOUBLE,                     -- % of n_checked with any indicator
    pct_male     DOUBLE,                     -- male only
    pct_female   DOUBLE,                     -- female only
    pct_both     DOUBLE,
    n_female_images INTEGER,                 -- labelled keyword-sample training images
    n_male_images   INTEGER,
    pct_marked_female_images DOUBLE,         -- % of female images whose caption has an indicator
    pct_marked_male_images   DOUBLE,
    training_pf  DOUBLE,                     -- %female of those images
    pct_female_indicator DOUBLE              -- % of their captions with a female (or both) indicator
);

-- Pearson r across occupations between training %female and % female-indicator captions.
CREATE TABLE IF NOT EXISTS indicator_correlation (
    strategy     VARCHAR NOT NULL,
    n_occupations INTEGER NOT NULL,
    r            DOUBLE,
    p_value      DOUBLE
);

