-- select, step 3a: matches of multi-word forms written with other white space than one
-- plain space ("Prime  Minister", "prime\u00a0minister", a line break) map to the form
-- with single spaces.
UPDATE _select_found AS t
SET form = f.form, occupation = f.occupation
FROM _select_forms AS f
WHERE t.occupation IS NULL
  AND f.form = regexp_replace(t.norm, '[\s\p{Zs}]+', ' ', 'g');
