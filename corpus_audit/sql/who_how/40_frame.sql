-- Every text with its association and labels: the input of the who-and-how tables.
SELECT t.text_id, t.text, a.association, l.specified, l.indicator
FROM texts_text t
JOIN texts_associations a USING (text_id)
LEFT JOIN texts_labels l USING (text_id)
ORDER BY t.text_id;
