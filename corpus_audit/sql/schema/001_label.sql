-- Tables of the `label` stage: face filter and perceived-gender labels. Owner: corpus_audit/stages/label/__init__.py
-- Migration 1 (the baseline: every table as of schema version 0, the studies made before
-- schema_version existed). Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

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
