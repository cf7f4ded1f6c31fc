-- Store one labelled batch of the indicators stage, inside the caller's transaction.
-- Reads the Arrow tables corpus_audit/stages/indicators/__init__.py registers for the batch: _indicators_batch
-- (caption_id, label, triggers), _indicator_triggers_batch (caption_id, kind, token, gender,
-- guess) and _indicator_texts_batch (caption_id, text: the text each label was made from).
INSERT INTO indicators (caption_id, label, triggers)
SELECT caption_id, label, triggers FROM _indicators_batch;

INSERT INTO indicator_triggers (caption_id, kind, token, gender, guess)
SELECT caption_id, kind, token, gender, guess FROM _indicator_triggers_batch;

INSERT INTO indicator_texts (caption_id, text_md5)
SELECT caption_id, md5_number(text) FROM _indicator_texts_batch;
