-- Caption variants (issue 17, docs/recaptioning.md): several captions of the same corpus rows,
-- compared side by side. Owners: corpus_audit/stages/variants/__init__.py (stage `variants`) and
-- corpus_audit/stages/recaption/__init__.py (stage `recaption`, table `recaptions`).
--
-- The tables of `select` and `indicators` (captions, mentions, indicators) stay as they are:
-- they hold the variant 'original', and a study without variants never touches these tables.
-- The variant dimension lives here, keyed (variant, caption_id): caption_id is the corpus row
-- ((file_id << 40) | row_in_file, as in captions), so the captions of one image in two variants
-- share it and it is the pairing key of every comparison.

-- One row per (variant, corpus row) in the comparison: every row whose caption mentions an
-- occupation in at least one variant, and every recaptioned training image. 'original' is the
-- text select reads; its label is made with the indicators stage's rules and settings.
CREATE TABLE IF NOT EXISTS caption_variants (
    variant      VARCHAR NOT NULL,           -- original | a [variants] columns name | a recaption variant
    caption_id   BIGINT NOT NULL,            -- the corpus row: the pairing key
    text         VARCHAR NOT NULL,           -- the caption (rows without text are not stored)
    source       VARCHAR NOT NULL,           -- column:<name> | recaption:<model id>
    label        VARCHAR NOT NULL,           -- male | female | both | none (METHODS 1.6)
    triggers     VARCHAR NOT NULL,           -- readable triggers, e.g. 'woman; his'
    PRIMARY KEY (variant, caption_id)
);

-- Every (variant, caption, occupation) mention, found by the select matcher.
CREATE TABLE IF NOT EXISTS variant_mentions (
    variant      VARCHAR NOT NULL,
    caption_id   BIGINT NOT NULL,
    occupation   VARCHAR NOT NULL,
    PRIMARY KEY (variant, caption_id, occupation)
);

-- Captions written by a model over the training images (stage `recaption`); one committed
-- transaction per batch, so a killed run loses at most the batch in flight.
CREATE TABLE IF NOT EXISTS recaptions (
    variant               VARCHAR NOT NULL,  -- recaption.variant
    image_id              VARCHAR NOT NULL,  -- images.image_id of a training image
    caption               VARCHAR,           -- NULL when skipped
    skip_reason           VARCHAR,           -- NULL | unreadable | no_text
    detail                VARCHAR,           -- the decoder's reason for an unreadable image, else ''
    model_id              VARCHAR NOT NULL,  -- recaption.model as configured
    settings_fingerprint  VARCHAR NOT NULL,  -- 16 hex digits of what decides the captions
    PRIMARY KEY (variant, image_id)
);

-- The comparison tables of the `variants` stage, one block per (baseline, variant) pair:
-- the columns of corpus_audit.methods.recaption.compare (documented there and in
-- docs/recaptioning.md), with variant_a = the baseline and variant_b = the other variant.
-- image_key is caption_id; example_keys is a '; '-joined list of caption ids.
CREATE TABLE IF NOT EXISTS variant_rates (
    variant_a VARCHAR, variant_b VARCHAR, variant VARCHAR, occupation VARCHAR,
    n_captions BIGINT, n_male_only BIGINT, n_female_only BIGINT, n_both BIGINT, n_none BIGINT,
    pct_male_only DOUBLE, pct_female_only DOUBLE, pct_both DOUBLE, pct_any DOUBLE,
    any_ci_low DOUBLE, any_ci_high DOUBLE
);
CREATE TABLE IF NOT EXISTS variant_mention_changes (
    variant_a VARCHAR, variant_b VARCHAR, occupation VARCHAR, n_a BIGINT, n_b BIGINT,
    n_kept BIGINT, n_gained BIGINT, n_lost BIGINT, pct_kept DOUBLE
);
CREATE TABLE IF NOT EXISTS variant_mention_flips (
    variant_a VARCHAR, variant_b VARCHAR, occupation VARCHAR, image_key BIGINT,
    change VARCHAR, caption_a VARCHAR, caption_b VARCHAR
);
CREATE TABLE IF NOT EXISTS variant_image_changes (
    image_key BIGINT, variant_a VARCHAR, variant_b VARCHAR, label_a VARCHAR, label_b VARCHAR,
    transition VARCHAR, changed BOOLEAN, occupations_a VARCHAR, occupations_b VARCHAR,
    caption_a VARCHAR, caption_b VARCHAR, triggers_a VARCHAR, triggers_b VARCHAR
);
CREATE TABLE IF NOT EXISTS variant_transitions (
    variant_a VARCHAR, variant_b VARCHAR, occupation VARCHAR, basis VARCHAR, label_a VARCHAR,
    label_b VARCHAR, transition VARCHAR, changed BOOLEAN, n_images BIGINT, pct_images DOUBLE,
    example_keys VARCHAR
);
CREATE TABLE IF NOT EXISTS variant_transition_examples (
    variant_a VARCHAR, variant_b VARCHAR, occupation VARCHAR, transition VARCHAR,
    image_key BIGINT, caption_a VARCHAR, caption_b VARCHAR, triggers_a VARCHAR, triggers_b VARCHAR
);
CREATE TABLE IF NOT EXISTS variant_differences (
    variant_a VARCHAR, variant_b VARCHAR, occupation VARCHAR, basis VARCHAR, metric VARCHAR,
    unit VARCHAR, n_images BIGINT, value_a DOUBLE, value_b DOUBLE, difference DOUBLE,
    ci_low DOUBLE, ci_high DOUBLE, n_a_only BIGINT, n_b_only BIGINT, test VARCHAR,
    p_value DOUBLE
);
CREATE TABLE IF NOT EXISTS variant_similarity (
    variant_a VARCHAR, variant_b VARCHAR, variant VARCHAR, occupation VARCHAR, n_pairs BIGINT,
    n_images BIGINT, mean_similarity DOUBLE, std_similarity DOUBLE, q05 DOUBLE, q25 DOUBLE,
    q50 DOUBLE, q75 DOUBLE, q95 DOUBLE
);
