-- The generated (or imported) images' perceived gender per model, occupation and prompt, beside
-- the labour statistics: the result of a model-only audit (docs/model_only.md), written by the
-- `analyze` stage for any study with generated or imported images. Owner:
-- corpus_audit/stages/analyze/generated_gender.py. Rewritten with the other analysis tables in
-- one transaction. Migration 7, idempotent.

-- One row per (model, occupation, prompt) and one pooled row per (model, occupation, language)
-- (prompt_id NULL). Counts add up: n_female + n_male + n_ambiguous + n_dropped = n_images.
CREATE TABLE IF NOT EXISTS generated_gender (
    model_id     VARCHAR NOT NULL,           -- the generator (images.model_id; 'unknown' when NULL)
    occupation   VARCHAR NOT NULL,           -- the prompt's occupation (prompts.occupation)
    prompt_id    VARCHAR,                    -- prompts.prompt_id; NULL = pooled over the
                                             -- occupation's prompts of that language
    language     VARCHAR NOT NULL,           -- the prompt's language (en, de, ...)
    n_images     INTEGER NOT NULL,           -- the set's images (generated or imported)
    n_female     INTEGER NOT NULL,           -- labelled female (at analysis.threshold)
    n_male       INTEGER NOT NULL,           -- labelled male
    n_ambiguous  INTEGER NOT NULL,           -- labelled, neither side confident enough
    n_dropped    INTEGER NOT NULL,           -- no label: dropped by the face filter (no, many
                                             -- or small faces, unreadable) or not labelled yet
    percent_female DOUBLE,                   -- 0-100, of n_female + n_male; NULL when that is 0
    ci_low       DOUBLE,                     -- Wilson interval of percent_female at
    ci_high      DOUBLE,                     --   analysis.confidence, 0-100; NULL when no labels
    labour_percent_female DOUBLE,            -- % women in the occupation, labour statistics
                                             -- (0-100); NULL when none is shipped for it
    labour_source VARCHAR                    -- which statistic: source and year (NULL: none)
);
