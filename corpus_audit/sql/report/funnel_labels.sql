-- Report: the labels of one source's images ($source) by the analysed classifier
-- ($classifier, '' when none), per label. Reads `images`, `labels`.
-- Owner: corpus_audit/report/context.py
SELECT l.label, count(*) AS n
FROM images i
JOIN labels l USING (image_id)
WHERE i.source = $source AND l.classifier = $classifier
GROUP BY ALL
ORDER BY l.label;
