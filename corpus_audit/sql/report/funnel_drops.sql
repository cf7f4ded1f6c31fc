-- Report: why the face filter dropped the images of one source ($source: training |
-- generated), most frequent reason first. Reads `images`, `face_filter`.
-- Owner: corpus_audit/report/context.py
SELECT coalesce(f.reason, 'dropped') AS reason, count(*) AS n
FROM images i
JOIN face_filter f USING (image_id)
WHERE i.source = $source AND NOT f.kept
GROUP BY ALL
ORDER BY n DESC, reason;
