-- images: forget the img2dataset statistics of one source (parameter: source) before
-- writing the ones its output holds now.
DELETE FROM download_stats WHERE source = ?;
