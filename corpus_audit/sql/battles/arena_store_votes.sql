-- battles import (arena files): the votes read from the files (temp view _arena_votes_in).
-- A vote already stored (same record hash, occurrence and aspect) is kept as it is.
INSERT INTO arena_votes
SELECT record_sha256, occurrence, aspect, format, source_file, file_sha256, record, model_a,
       model_b, language, prompt, vote, outcome, created_at, updated_at, current_timestamp
FROM _arena_votes_in
ON CONFLICT DO NOTHING;
