-- who_how per model (texts.source = 'llm': the texts of the `llm_texts` stage): the result
-- tables of schema_002_who_how.sql get a `model` column, the generating model of the texts
-- compared (NULL for captions and text corpora, where there is one set of texts).
ALTER TABLE texts_agreement ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE texts_who ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE texts_deciles ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE texts_marked_words ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE texts_marked_summary ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE texts_calibration ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE texts_srbs ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE texts_srbs_tests ADD COLUMN IF NOT EXISTS model VARCHAR;
