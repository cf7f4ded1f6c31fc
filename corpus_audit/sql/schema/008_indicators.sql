-- Per-corpus results of the `indicators` stage (docs/indicators.md, "Per corpus"). Owner:
-- corpus_audit/stages/indicators/__init__.py. Rewritten in one transaction at the end of every
-- indicators run, from captions, mentions, indicators, indicator_triggers and corpus_files,
-- with the groups of corpus.groups / corpus.hypernymized (corpus_audit/methods/corpus_groups.py).
-- Percentages are 0-100. Migration 8, idempotent.

-- The corpus group of each corpus file, as the last indicators run assigned it.
CREATE TABLE IF NOT EXISTS corpus_file_groups (
    file_id       INTEGER PRIMARY KEY,       -- corpus_files.file_id
    corpus_group  VARCHAR NOT NULL,          -- group name (corpus.groups; else the file's key)
    hypernymized  BOOLEAN NOT NULL           -- the group is declared in corpus.hypernymized
);

-- Per corpus group and occupation, and pooled: the select counts (rows read, occupation
-- captions) and the explicit gender indicators of those captions. A caption naming two
-- occupations counts once for each occupation, and once in an occupation-NULL row.
CREATE TABLE IF NOT EXISTS corpus_summary (
    corpus_group        VARCHAR,             -- the group; NULL = all corpus files pooled
    occupation          VARCHAR,             -- NULL = all occupations (distinct captions)
    files               INTEGER NOT NULL,    -- corpus files in the group
    rows_total          BIGINT NOT NULL,     -- corpus rows select read in those files
    captions            BIGINT NOT NULL,     -- distinct captions mentioning the occupation (any
                                             -- occupation on occupation-NULL rows)
    with_indicator      BIGINT NOT NULL,     -- of them, labelled male, female or both
    male_only           BIGINT NOT NULL,     -- labelled male
    female_only         BIGINT NOT NULL,     -- labelled female
    both_genders        BIGINT NOT NULL,     -- labelled both
    pct_any_indicator   DOUBLE,              -- 100 * with_indicator / captions (pooled over the
                                             -- captions); NULL when captions = 0
    ci_low              DOUBLE,              -- lower end of the Wilson interval of
                                             -- pct_any_indicator at analysis.confidence (percent)
    ci_high             DOUBLE,              -- upper end of that Wilson interval (percent)
    mean_occupation_pct DOUBLE,              -- occupation-NULL rows: the mean over the group's
                                             -- occupations of each one's pct_any_indicator (the
                                             -- paper's statistic); NULL on per-occupation rows
    occupations         INTEGER,             -- occupation-NULL rows: occupations with a caption
                                             -- in the group; NULL on per-occupation rows
    name_triggers       BIGINT NOT NULL,     -- first-name triggers (indicator_triggers kind
                                             -- 'name') in these captions: 0 in a corpus whose
                                             -- names were replaced (evidence, not the flag)
    hypernymized        BOOLEAN              -- every file of the group is declared hypernymized
                                             -- (pooled row: any of them is)
);
