-- who_how on LLM-written texts (texts.source = 'llm', the `llm_texts` stage): the same three
-- views as texts_10_views_captions.sql over llm_texts. The specified gender is the prompt's;
-- texts without text (refusals) are left out; texts_model names each text's model.
CREATE OR REPLACE TEMP VIEW texts_text AS
SELECT text_id, text FROM llm_texts WHERE text <> '';

CREATE OR REPLACE TEMP VIEW texts_labels AS
SELECT text_id, CASE WHEN gender <> 'unspecified' THEN gender END AS specified,
       NULL::VARCHAR AS indicator
FROM llm_texts WHERE text <> '';

CREATE OR REPLACE TEMP VIEW texts_occ AS
SELECT text_id, occupation FROM llm_texts WHERE text <> '';

CREATE OR REPLACE TEMP VIEW texts_model AS
SELECT text_id, model FROM llm_texts WHERE text <> '';
