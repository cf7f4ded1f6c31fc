-- select, step 4: one mentions row per (caption, occupation); matched_form is the first form
-- of that occupation in the caption ("teachers" for "Teachers and a teacher's desk").
-- A caption naming two occupations gets two rows and counts for both.
INSERT INTO mentions (caption_id, occupation, matched_form)
SELECT caption_id, occupation, arg_min(form, pos)
FROM _select_found
WHERE occupation IS NOT NULL
GROUP BY caption_id, occupation;
