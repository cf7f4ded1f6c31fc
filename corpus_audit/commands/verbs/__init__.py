"""The verbs of ``corpus-audit``: one module each, holding its parser and its handler.

Every module has ``add_parser(sub)`` (adds its subcommand(s), ``func=run``) and
``run(args) -> int``; :mod:`corpus_audit.commands.verbs.stage` is the one module of every
stage verb, whose help and flags are the stage's declaration in
:mod:`corpus_audit.core.catalogue`. Verb modules import only light modules at the top, so
``corpus-audit --help`` loads no DuckDB, numpy or model library: a handler imports the work
(the study store, a stage, ``commands/<verb>.py``) when it runs.
"""

from __future__ import annotations

from corpus_audit.commands.verbs import (
    amplify,
    battles,
    config,
    demo,
    export,
    fetch_models,
    import_images,
    init,
    plugins,
    regenerate,
    run,
    stage,
    status,
    texts,
    validate,
)

# the order of `corpus-audit --help`
VERBS = (
    init,
    run,
    status,
    stage,
    config,
    validate,
    battles,
    amplify,
    regenerate,
    import_images,
    texts,
    demo,
    export,
    plugins,
    fetch_models,
)
