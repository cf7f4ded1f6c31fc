"""What several stages, or a stage and the report, share of the study's tables.

A room below ``stages/`` and ``report/`` (and above ``methods/``, ``backends/`` and ``core/``),
so that no stage imports another stage and the report imports no stage: reading tables back
(:mod:`~corpus_audit.tables.read`), the analysis tables' names and input fingerprint
(:mod:`~corpus_audit.tables.analysis`), the labels the analysis uses
(:mod:`~corpus_audit.tables.labelled`), the cut at N labelled images
(:mod:`~corpus_audit.tables.subsets`), PST frames in and out of the study
(:mod:`~corpus_audit.tables.pst_frames`) and the language of each prompt set
(:mod:`~corpus_audit.tables.prompt_languages`).
"""
