-- PST report: per role, the generated-image SS of each two-person kind and variant beside the
-- corpus's own (caption-side) %female and SS of that role, so a reader sees whether the
-- model's paired bias is already in its data.
SELECT s.kind, s.variant, s.group_name AS role, l.stereotype,
       s.n_classified, s.ss, s.ci_low, s.ci_high,
       l.percent_female AS image_percent_female,
       c.n_female + c.n_male AS caption_n, c.percent_female AS caption_percent_female,
       c.ss AS caption_ss, l.labor_percent_female
FROM pst_scores s
LEFT JOIN pst_labor l
       ON l.side = 'image' AND l.kind = s.kind AND l.variant = s.variant AND l.role = s.group_name
LEFT JOIN pst_caption_roles c ON c.role = s.group_name
WHERE s.side = 'image' AND s.scope = 'role'
ORDER BY s.kind, s.variant, l.stereotype DESC, s.group_name
