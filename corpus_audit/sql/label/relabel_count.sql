-- How many stored labels of $classifier were made at another threshold than $threshold, and
-- how many of them `relabel.sql` changes.
-- Owner: corpus_audit/stages/label/__init__.py
SELECT count(*),
       count(*) FILTER (WHERE label <> CASE
           WHEN p_female >= $threshold AND p_female > 0.5 THEN 'female'
           WHEN 1 - p_female >= $threshold AND p_female < 0.5 THEN 'male'
           ELSE 'ambiguous' END)
FROM labels WHERE classifier = $classifier AND threshold <> $threshold;
