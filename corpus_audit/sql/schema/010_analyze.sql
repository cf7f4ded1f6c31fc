-- The 18 intersectional cells corrected for the instruments' errors (docs/attributes.md, "The
-- cells, corrected"): gender and age group corrected jointly within each skin-tone group with the
-- Kronecker product of the two sources' error matrices learnt from annotator labels; the tone
-- groups as measured (no human truth maps L* groups). Owner: corpus_audit/stages/analyze/
-- attribute_cells.py. Migration 10, idempotent.
ALTER TABLE attribute_intersections ADD COLUMN IF NOT EXISTS training_corrected DOUBLE;  -- percent
ALTER TABLE attribute_intersections ADD COLUMN IF NOT EXISTS generated_corrected DOUBLE; -- percent
ALTER TABLE attribute_intersections ADD COLUMN IF NOT EXISTS change_corrected DOUBLE;    -- pp
ALTER TABLE attribute_intersections ADD COLUMN IF NOT EXISTS change_corrected_low DOUBLE;
ALTER TABLE attribute_intersections ADD COLUMN IF NOT EXISTS change_corrected_high DOUBLE;
ALTER TABLE attribute_intersections ADD COLUMN IF NOT EXISTS corrected_note VARCHAR;     -- why not
