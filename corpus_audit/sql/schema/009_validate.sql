-- Tables of `corpus-audit validate` for the perceived attributes beyond gender (docs/attributes.md,
-- "Annotator labels"). Owner: corpus_audit/commands/validate.py. Migration 9, idempotent.

-- The sheet's further questions, answered per image and annotator (NULL: not asked, not
-- answered, or "can't tell").
ALTER TABLE human_labels ADD COLUMN IF NOT EXISTS monk INTEGER;      -- Monk Skin Tone 1-10
ALTER TABLE human_labels ADD COLUMN IF NOT EXISTS age_bin VARCHAR;   -- under_16 | 16_24 | ... | 65_plus
ALTER TABLE human_labels ADD COLUMN IF NOT EXISTS quality VARCHAR;   -- ok | poor (the image)
ALTER TABLE human_labels ADD COLUMN IF NOT EXISTS race VARCHAR;      -- only with --race (opt-in)
ALTER TABLE human_labels ADD COLUMN IF NOT EXISTS swatch_order VARCHAR; -- Monk swatches as shown

-- Krippendorff's alpha of the annotators per attribute and image source (validate import).
CREATE TABLE IF NOT EXISTS validation_agreement (
    attribute    VARCHAR NOT NULL,           -- gender | skin_tone | age_bin | race
    source       VARCHAR NOT NULL,           -- training | <model_id> | pooled
    n_items      INTEGER NOT NULL,           -- images with at least two answers
    n_annotators INTEGER NOT NULL,
    alpha        DOUBLE,                     -- NULL: undefined (one annotator, no variation)
    alpha_kind   VARCHAR NOT NULL            -- ordinal (skin tone, age) | nominal (gender, race)
);
