-- Replace the corpus group of every corpus file (corpus_file_groups) with the rows of the
-- registered arrow table _corpus_groups_in (file_id, corpus_group, hypernymized), computed by
-- corpus_audit/methods/corpus_groups.py from corpus.groups and corpus.hypernymized.
DELETE FROM corpus_file_groups;
INSERT INTO corpus_file_groups (file_id, corpus_group, hypernymized)
SELECT file_id, corpus_group, hypernymized FROM _corpus_groups_in;
