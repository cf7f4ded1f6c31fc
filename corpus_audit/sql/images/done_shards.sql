-- images: (source, shard) units finished by an earlier run (a rerun skips them).
SELECT source, shard FROM image_shards;
