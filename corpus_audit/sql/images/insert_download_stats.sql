-- images: one img2dataset *_stats.json; parameters source, shard, count, successes,
-- failed_to_download, failed_to_resize, status_dict (JSON text).
INSERT INTO download_stats VALUES (?, ?, ?, ?, ?, ?, ?);
