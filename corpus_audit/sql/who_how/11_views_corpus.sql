-- who_how on a text corpus (texts.source = 'corpus', `corpus-audit texts`): the same three
-- views as who_how/10_views_captions.sql, over texts_documents and texts_occupations. The
-- specified gender is the corpus's gender column; there is no indicator label.
CREATE OR REPLACE TEMP VIEW texts_text AS
SELECT text_id, text FROM texts_documents;

CREATE OR REPLACE TEMP VIEW texts_labels AS
SELECT text_id, specified, NULL::VARCHAR AS indicator FROM texts_documents;

CREATE OR REPLACE TEMP VIEW texts_occ AS
SELECT DISTINCT text_id, occupation FROM texts_occupations;
