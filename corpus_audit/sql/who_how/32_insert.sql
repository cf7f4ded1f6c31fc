-- Store one association batch (registered as texts_batch) with the md5 of each text counted.
INSERT INTO texts_associations BY NAME
SELECT b.*, md5_number(t.text) AS text_md5
FROM texts_batch b
JOIN texts_text t USING (text_id);
