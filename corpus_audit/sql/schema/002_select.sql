-- Prompt tables (MAGBIG, BAFIS; corpus_audit/methods/lexicon/study_prompts.py): the language, variant
-- and occupational category of each of their prompts, written by `select` next to `prompts`.
-- Prompts of templated sets have no row here.
CREATE TABLE IF NOT EXISTS prompt_categories (
    prompt_id    VARCHAR PRIMARY KEY,        -- prompts.prompt_id ('magbig/direct/de:1:nurse')
    family       VARCHAR NOT NULL,           -- magbig | bafis | a user file's stem
    variant      VARCHAR NOT NULL,           -- direct | indirect | direct_feminine | ...
    language     VARCHAR NOT NULL,           -- en, de, ...
    category     VARCHAR                     -- occupational category; NULL when not listed
);
