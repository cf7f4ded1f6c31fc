-- neighbors, step 3: texts still to embed, numbered in order of length so each chunk (and
-- each model batch in it) pads to similar lengths. rn is 1-based.
CREATE OR REPLACE TEMP TABLE _nb_missing AS
SELECT row_number() OVER (ORDER BY length(text), key) AS rn, key, text
FROM _nb_texts
WHERE key NOT IN (SELECT key FROM _nb_found);
