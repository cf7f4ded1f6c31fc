-- images: an item of a source that cannot be used; parameters source, item, reason, detail.
INSERT INTO image_skips VALUES (?, ?, ?, ?);
