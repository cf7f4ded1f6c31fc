-- Perceived attributes written by the `label` stage: perceived age and perceived skin tone.
-- Owner: corpus_audit/stages/label/__init__.py (rows made by corpus_audit/stages/label/attributes.py).
-- "Perceived" everywhere: these are a model's / a measurement's reading of a photo, never a
-- person's identity. Migration 9, idempotent (IF NOT EXISTS), run in one transaction by
-- Study.migrate.

-- Perceived age of the kept face of every image the face filter kept (label.age).
CREATE TABLE IF NOT EXISTS perceived_age (
    image_id     VARCHAR NOT NULL,
    model        VARCHAR NOT NULL,   -- e.g. 'agegender-age:<12-hex digest>'
    expected_age DOUBLE NOT NULL,    -- years, sum_k k * p_k over the 81 classes (0..80)
    age_bin      VARCHAR NOT NULL,   -- under_16 | 16_24 | ... | 65_plus (argmax of binned probs)
    age_group    VARCHAR,            -- under_35 | 35_54 | 55_plus; NULL for minors
    minor        BOOLEAN NOT NULL,   -- age_bin = 'under_16'
    p_bins       DOUBLE[] NOT NULL,  -- 7 probabilities in the order of the age bins above
    probs        FLOAT[] NOT NULL,   -- the model's 81 class probabilities
    PRIMARY KEY (image_id, model)
);

-- Perceived skin tone measured on the kept face (label.skin_tone). Images the face filter
-- dropped get an `unmeasurable` row (reason = the filter's reason) carrying image_l_star.
CREATE TABLE IF NOT EXISTS skin_tone (
    image_id     VARCHAR NOT NULL,
    method       VARCHAR NOT NULL,   -- e.g. 'cheeks5:v1' or 'mesh468:v1'
    status       VARCHAR NOT NULL,   -- measured | unmeasurable
    reason       VARCHAR,            -- why unmeasurable (too_few_pixels, no_landmarks, grayscale ...)
    n_pixels     INTEGER NOT NULL,   -- skin pixels kept after hygiene
    l_star       DOUBLE,             -- CIELAB D65 median of kept pixels, 0-100
    a_star       DOUBLE, b_star DOUBLE,
    hue_deg      DOUBLE,             -- atan2(b*, a*) in degrees
    ita_deg      DOUBLE,             -- atan2(L* - 50, b*) in degrees (kept for comparison)
    flags        VARCHAR,            -- comma list of quality flags ('' when none): dark,
                                     -- overexposed, low_contrast, small_face, colour_cast, grayscale
    image_l_star DOUBLE,             -- image-level lightness proxy (mean L* of the whole image)
    PRIMARY KEY (image_id, method)
);
