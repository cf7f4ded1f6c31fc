-- Images whose face filter result depends on images.max_pixels and no longer matches it:
-- refused as too large (their pixel count is in the detail text) but within the limit now, or
-- filtered before but over the limit now. Their rows go and they are filtered again.
-- Owner: corpus_audit/stages/label/__init__.py
SELECT image_id FROM face_filter
WHERE (reason = 'unreadable'
       AND TRY_CAST(regexp_extract(detail, '= ([0-9]+) > max_pixels', 1) AS BIGINT) <= $max_pixels)
   OR (image_width::BIGINT * image_height::BIGINT > $max_pixels);
