-- select, step 3b: a form whose first or last letter is not ASCII is guarded by one consumed
-- non-letter character (RE2's \b only knows ASCII), which is stripped here before mapping.
UPDATE _select_found AS t
SET form = f.form, occupation = f.occupation
FROM _select_forms AS f
WHERE t.occupation IS NULL
  AND f.form = regexp_replace(regexp_replace(t.norm, '[\s\p{Zs}]+', ' ', 'g'),
                              '^[^\p{L}\p{N}_]|[^\p{L}\p{N}_]$', '', 'g');
