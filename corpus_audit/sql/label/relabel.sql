-- The stored labels of $classifier at another threshold, set again from p_female at
-- $threshold by the rule of `decide` (female: p >= t and p > 0.5; male: 1 - p >= t and
-- p < 0.5; else ambiguous).
-- Owner: corpus_audit/stages/label/__init__.py
UPDATE labels SET
    label = CASE
        WHEN p_female >= $threshold AND p_female > 0.5 THEN 'female'
        WHEN 1 - p_female >= $threshold AND p_female < 0.5 THEN 'male'
        ELSE 'ambiguous'
    END,
    threshold = $threshold
WHERE classifier = $classifier AND threshold <> $threshold;
