-- select, step 3: every match of the regex in every candidate caption, with its place in the
-- caption (pos = 1, 2, ...), mapped to its lexicon form by the lower-cased match. The few
-- matches that do not map yet (odd white space, guarded non-ASCII edges) are mapped by
-- steps 3a and 3b; occupation stays NULL for a match no step maps (counted; expected 0).
-- (unnest + generate_subscripts: ~6x faster than unnest ... WITH ORDINALITY in DuckDB 2.0.)
CREATE OR REPLACE TEMP TABLE _select_found AS
WITH found AS (
    SELECT caption_id, unnest(matches) AS match, generate_subscripts(matches, 1) AS pos
    FROM (
        SELECT caption_id, regexp_extract_all(text, $pattern, 0, 'i') AS matches
        FROM _select_candidates
    )
)
SELECT found.caption_id, found.pos, lower(found.match) AS norm, f.form, f.occupation
FROM found
LEFT JOIN _select_forms f ON f.form = lower(found.match);
