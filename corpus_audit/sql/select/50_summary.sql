-- select, summary: per lexicon occupation (in lexicon order) the captions that mention it and
-- the size of its keyword sample. $occupations is the lexicon's list of names.
SELECT o.occupation,
       coalesce(m.n, 0) AS captions,
       coalesce(s.n, 0) AS sample
FROM unnest($occupations) WITH ORDINALITY AS o(occupation, ord)
LEFT JOIN (SELECT occupation, count(*) AS n FROM mentions GROUP BY occupation) m
       ON m.occupation = o.occupation
LEFT JOIN (SELECT occupation, count(*) AS n FROM samples WHERE strategy = 'keyword'
           GROUP BY occupation) s
       ON s.occupation = o.occupation
ORDER BY o.ord;
