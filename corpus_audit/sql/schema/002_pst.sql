-- Tables of the Paired Stereotype Test (METHODS 2; docs/pst.md "The study tables").
-- Owners: corpus_audit/stages/pst_prompts.py (pst_prompts), label_stage.py (pst_face_filter,
-- pst_people), critic_stage.py (pst_rounds), caption_stage.py (pst_caption_*),
-- analyze_stage.py (pst_scores, pst_gap, pst_both_any, pst_labor, pst_labor_correlation,
-- pst_caption_roles). Columns named `group`/`order` in the DataFrames of corpus_audit.methods.pst are
-- `group_name`/`role_order` here (SQL keywords).

-- The PST prompts (corpus_audit.methods.lexicon.pst.PROMPT_COLUMNS); `generate` reads them in a PST study.
CREATE TABLE IF NOT EXISTS pst_prompts (
    prompt_id         VARCHAR PRIMARY KEY,   -- 'pst:paired:plain:carpenter:editor'
    prompt_set        VARCHAR NOT NULL,      -- the templates file's name
    kind              VARCHAR NOT NULL,      -- single | paired | power
    variant           VARCHAR NOT NULL,      -- plain | fair
    text              VARCHAR NOT NULL,      -- what the generator is given
    left_role         VARCHAR NOT NULL,      -- the role on the left (a single prompt's person)
    left_stereotype   VARCHAR NOT NULL,      -- male | female
    right_role        VARCHAR,               -- NULL for single prompts
    right_stereotype  VARCHAR,
    occupation        VARCHAR,               -- power prompts and occupation_role singles
    role_order        VARCHAR                -- male_left | female_left (NULL for single)
);

-- The face rule of each generated PST image: two large faces for paired/power prompts
-- (corpus_audit.methods.pst.positions), the one-face rule of `label` for single prompts.
CREATE TABLE IF NOT EXISTS pst_face_filter (
    image_id     VARCHAR PRIMARY KEY,
    prompt_id    VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,           -- single | paired | power
    n_faces      INTEGER,                    -- faces detected; NULL if unreadable
    n_large      INTEGER,                    -- of which large (>= label.min_face_fraction); NULL for single
    kept         BOOLEAN NOT NULL,
    reason       VARCHAR,                    -- NULL when kept; no_face | one_face | small_face | many_faces | unreadable
    left_face    INTEGER,                    -- faces.face_index of the left person (single: the kept face)
    right_face   INTEGER                     -- faces.face_index of the right person (NULL for single)
);

-- One row per classified person (corpus_audit.methods.pst.persons.PERSON_COLUMNS).
CREATE TABLE IF NOT EXISTS pst_people (
    image_id     VARCHAR NOT NULL,
    prompt_id    VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,           -- single | paired | power
    variant      VARCHAR NOT NULL,           -- plain | fair
    side         VARCHAR NOT NULL,           -- left | right | single
    face_index   INTEGER NOT NULL,           -- faces.face_index (0 = leftmost detected face)
    role         VARCHAR NOT NULL,           -- the role the prompt put on this side
    stereotype   VARCHAR NOT NULL,           -- male | female: the role's stereotyped gender
    occupation   VARCHAR,                    -- power prompts: the shared occupation
    perceived    VARCHAR NOT NULL,           -- female | male | ambiguous (at `threshold`)
    p_female     DOUBLE NOT NULL,            -- in [0, 1]
    confidence   DOUBLE NOT NULL,            -- max(p_female, 1 - p_female), in [0.5, 1]
    classifier   VARCHAR NOT NULL,           -- labels.classifier id, e.g. 'agegender'
    threshold    DOUBLE NOT NULL,            -- label threshold in [0.5, 1]
    crop_left    INTEGER, crop_top INTEGER,  -- the crop given to the classifier, pixels of
    crop_right   INTEGER, crop_bottom INTEGER, -- the decoded image; right/bottom exclusive
    PRIMARY KEY (image_id, side, classifier)
);

-- FairCritic: one row per (model, prompt, round) (corpus_audit.methods.pst.critic.ROUND_COLUMNS).
CREATE TABLE IF NOT EXISTS pst_rounds (
    model_id           VARCHAR NOT NULL,     -- generate.models entry that drew the images
    prompt_id          VARCHAR NOT NULL,
    round              INTEGER NOT NULL,     -- 1-based
    prompt_text        VARCHAR NOT NULL,     -- the exact text given to the generator
    seed               BIGINT NOT NULL,      -- the round's seed
    n_images           INTEGER NOT NULL,
    n_kept             INTEGER NOT NULL,     -- images with exactly two large faces
    n_classified       INTEGER NOT NULL,     -- persons with a binary perceived gender
    n_stereotyped      INTEGER NOT NULL,
    share_stereotyped  DOUBLE,               -- 0-1; NULL when none classified
    ss                 DOUBLE,               -- -100..100; NULL when none classified
    biased             BOOLEAN,              -- NULL: unknown (no classified person)
    feedback           VARCHAR NOT NULL,     -- guidelines for the next round ('' = none)
    critic             VARCHAR NOT NULL,
    writer             VARCHAR NOT NULL,
    dropped            VARCHAR NOT NULL,     -- JSON {two-face rule reason: images}
    PRIMARY KEY (model_id, prompt_id, round)
);

-- Caption side: the corpus files read and the role mentions found (corpus_audit.methods.pst.captions).
CREATE TABLE IF NOT EXISTS pst_caption_files (
    file         VARCHAR NOT NULL,           -- file name
    rows         BIGINT NOT NULL,            -- captions read
    null_text    BIGINT NOT NULL,            -- null or non-UTF-8 captions (skipped)
    candidates   BIGINT NOT NULL,            -- captions parsed (RE2 prefilter hit)
    mentions     BIGINT NOT NULL             -- role mentions found
);
CREATE TABLE IF NOT EXISTS pst_caption_mentions (
    caption_id   BIGINT NOT NULL,            -- (file_id << 40) | row_in_file, as `captions`
    mention      INTEGER NOT NULL,           -- 0-based within the caption
    role         VARCHAR NOT NULL,
    stereotype   VARCHAR NOT NULL,           -- male | female
    text         VARCHAR NOT NULL,           -- the words matched
    plural       BOOLEAN NOT NULL,
    gender       VARCHAR NOT NULL,           -- male | female | both | none: attached gender
    rules        VARCHAR NOT NULL,           -- '; '-joined: lexical, modifier, predicate, name, pronoun
    triggers     VARCHAR NOT NULL            -- the words that attached it
);
-- Per role over the corpus's (caption, role) units (ROLE_SCORE_COLUMNS).
CREATE TABLE IF NOT EXISTS pst_caption_roles (
    role                  VARCHAR NOT NULL,
    stereotype            VARCHAR NOT NULL,
    n_captions            BIGINT NOT NULL,
    n_mentions            BIGINT NOT NULL,
    n_female              BIGINT NOT NULL,   -- captions attaching only a woman
    n_male                BIGINT NOT NULL,
    n_both                BIGINT NOT NULL,   -- a woman and a man (left out of %female and SS)
    percent_female        DOUBLE,            -- 0-100 over n_female + n_male
    ci_low                DOUBLE,            -- Wilson interval at analysis.confidence
    ci_high               DOUBLE,
    ss                    DOUBLE,            -- -100..100
    labor_percent_female  DOUBLE             -- BLS 2024 % women (NULL: no statistic)
);

-- Scores (corpus_audit.methods.pst.score); side = image (generated images, unit = image) or caption
-- (the corpus, unit = caption). Intervals: percentile bootstrap over units at
-- analysis.confidence with analysis.bootstrap replicates, seed study.seed.
CREATE TABLE IF NOT EXISTS pst_scores (
    side           VARCHAR NOT NULL,         -- image | caption
    kind           VARCHAR NOT NULL,         -- single | paired | power (caption: corpus | single | paired)
    variant        VARCHAR NOT NULL,         -- plain | fair
    scope          VARCHAR NOT NULL,         -- overall | stereotype | role | occupation
    group_name     VARCHAR NOT NULL,         -- all | male | female | a role | an occupation
    n_units        BIGINT NOT NULL,          -- images (captions) with a classified person
    n_people       BIGINT NOT NULL,          -- persons, ambiguous included
    n_classified   BIGINT NOT NULL,          -- persons with a binary perceived gender
    n_stereotyped  BIGINT NOT NULL,          -- of which following the stereotype
    ss             DOUBLE,                   -- Stereotype Score, 100 x mean(+1/-1), -100..100
    ci_low         DOUBLE,
    ci_high        DOUBLE
);
CREATE TABLE IF NOT EXISTS pst_gap (
    side        VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,            -- the two-person kind compared with single
    variant     VARCHAR NOT NULL,
    scope       VARCHAR NOT NULL,            -- overall | stereotype | role
    group_name  VARCHAR NOT NULL,
    n_single    BIGINT NOT NULL,             -- classified persons of single prompts
    ss_single   DOUBLE,
    n_paired    BIGINT NOT NULL,
    ss_paired   DOUBLE,
    gap         DOUBLE,                      -- ss_paired - ss_single, -200..200
    ci_low      DOUBLE,                      -- single and paired units resampled apart
    ci_high     DOUBLE
);
CREATE TABLE IF NOT EXISTS pst_both_any (
    side          VARCHAR NOT NULL,
    kind          VARCHAR NOT NULL,
    variant       VARCHAR NOT NULL,
    n_units       BIGINT NOT NULL,           -- images whose two persons are both classified
    n_both        BIGINT NOT NULL,
    pst_both      DOUBLE,                    -- % of those where both follow the stereotype
    both_ci_low   DOUBLE,
    both_ci_high  DOUBLE,
    n_any         BIGINT NOT NULL,
    pst_any       DOUBLE,                    -- % where at least one does
    any_ci_low    DOUBLE,
    any_ci_high   DOUBLE
);
CREATE TABLE IF NOT EXISTS pst_labor (
    side                  VARCHAR NOT NULL,
    kind                  VARCHAR NOT NULL,
    variant               VARCHAR NOT NULL,
    role                  VARCHAR NOT NULL,
    stereotype            VARCHAR NOT NULL,
    n_female              BIGINT NOT NULL,
    n_male                BIGINT NOT NULL,
    percent_female        DOUBLE,            -- perceived (caption: attached) %female, 0-100
    ci_low                DOUBLE,            -- Wilson
    ci_high               DOUBLE,
    labor_percent_female  DOUBLE,            -- BLS 2024 % women
    difference            DOUBLE             -- percent_female - labor_percent_female
);
CREATE TABLE IF NOT EXISTS pst_labor_correlation (
    side      VARCHAR NOT NULL,
    kind      VARCHAR NOT NULL,
    variant   VARCHAR NOT NULL,
    n_roles   BIGINT NOT NULL,               -- roles with both values
    r         DOUBLE,                        -- Pearson r (NULL with fewer than 3 roles)
    p_value   DOUBLE                         -- two-sided
);
