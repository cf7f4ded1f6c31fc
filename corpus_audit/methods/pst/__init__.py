"""The Paired Stereotype Test (Wan & Chang, METHODS 2): the method's core, one job a module.

- :mod:`corpus_audit.methods.lexicon.pst` — roles and templates as data files; the prompt sets
  (single, paired, power, the fairness variant), one :class:`~corpus_audit.methods.lexicon.pst.PstPrompt`
  per prompt.
- :mod:`.positions` — the two-face rule (keep/drop, left/right, crop boxes), pure.
- :mod:`.persons` — each person's crop through a perceived-gender classifier: person rows.
- :mod:`.score` — Stereotype Score, single vs paired and the gap, PST-Both/Any, bootstrap
  intervals over images, %female vs labour statistics.
- :mod:`.figures` — the labour-statistics scatter.
- :mod:`.critic` — the FairCritic loop over rounds (generator, critic, feedback writer,
  round store: protocols with defaults).
- :mod:`.captions` — the caption-side score: roles with a gender attached by a dependency
  parse, per caption, per role and for captions that name two roles.

Every function returns a pandas DataFrame whose columns (``*_COLUMNS`` constants) are what
the study tables will hold; see docs/pst.md.
"""
