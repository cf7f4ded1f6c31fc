-- `pst_label`'s summary: per prompt kind, images filtered, kept, and persons per perceived
-- gender from the configured classifier ($cid).
SELECT q.kind,
       count(*) AS images,
       count(*) FILTER (WHERE q.kept) AS kept,
       coalesce(sum(pp.n_people), 0) AS people,
       coalesce(sum(pp.n_female), 0) AS female,
       coalesce(sum(pp.n_male), 0) AS male,
       coalesce(sum(pp.n_ambiguous), 0) AS ambiguous
FROM pst_face_filter q
LEFT JOIN (
    SELECT image_id, count(*) AS n_people,
           count(*) FILTER (WHERE perceived = 'female') AS n_female,
           count(*) FILTER (WHERE perceived = 'male') AS n_male,
           count(*) FILTER (WHERE perceived = 'ambiguous') AS n_ambiguous
    FROM pst_people WHERE classifier = $cid GROUP BY image_id
) pp ON pp.image_id = q.image_id
GROUP BY q.kind
ORDER BY q.kind
