-- who_how on the study's occupation captions (texts.source = 'captions'): the stage's inputs
-- as three temporary views, so the rest of the stage is the same for captions and corpora.
-- texts_text: every text once. texts_labels: the gender a caption *specifies* through its
-- explicit indicator words and names (female when only female ones, male when only male
-- ones; pronouns are left out because they decide the association), and the `indicators`
-- stage's own label (female/male; both and none are no specification). texts_occ: one row
-- per (text, occupation).
CREATE OR REPLACE TEMP VIEW texts_text AS
SELECT caption_id AS text_id, text FROM captions;

CREATE OR REPLACE TEMP VIEW texts_labels AS
SELECT c.caption_id AS text_id,
       CASE WHEN w.female AND NOT w.male THEN 'female'
            WHEN w.male AND NOT w.female THEN 'male' END AS specified,
       CASE WHEN i.label IN ('female', 'male') THEN i.label END AS indicator
FROM captions c
LEFT JOIN (
    SELECT caption_id, bool_or(gender = 'female') AS female, bool_or(gender = 'male') AS male
    FROM indicator_triggers WHERE kind <> 'pronoun' GROUP BY caption_id
) w USING (caption_id)
LEFT JOIN indicators i USING (caption_id);

CREATE OR REPLACE TEMP VIEW texts_occ AS
SELECT DISTINCT caption_id AS text_id, occupation FROM mentions;
