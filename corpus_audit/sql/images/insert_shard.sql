-- images: a finished unit; parameters source, shard, records, registered.
INSERT INTO image_shards VALUES (?, ?, ?, ?, CAST(current_timestamp AS TIMESTAMP));
