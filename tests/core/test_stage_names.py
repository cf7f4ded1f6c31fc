"""Every run a module records is a stage of the catalogue: each name passed to
``study.stage(`` or the runner's ``@stage_body(`` anywhere in ``corpus_audit/`` is declared in
``core/catalogue.py``, so no
command can record an undeclared run again (``status``, the help and ``require_inputs`` know
every run a study holds). Read with :mod:`ast`, nothing imported or run; the checker is
itself tested on snippets, so it can fail."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from corpus_audit.core.catalogue import COMMAND_STAGES, RUN_ORDERS, STAGE_NAMES, STAGES

PACKAGE = Path(__file__).resolve().parents[2] / "corpus_audit"
#: modules that pass on a name given to them (the runner opens the run of ``stage_body(NAME)``,
#: whose NAME the scan reads where the decorator is)
FORWARDERS = {"corpus_audit/core/stage_runner.py"}


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's string constants: ``NAME = "pst_label"`` -> {"NAME": "pst_label"}."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out[target.id] = node.value.value
    return out


def _records(func: ast.expr) -> bool:
    """Whether a call of ``func`` records a run: ``<x>.stage(...)`` or ``stage_body(...)``."""
    if isinstance(func, ast.Attribute):
        return func.attr in ("stage", "stage_body")
    return isinstance(func, ast.Name) and func.id == "stage_body"


def recorded_names(source: str) -> list[tuple[int, str | None]]:
    """``(line, stage name)`` of every ``<x>.stage(NAME, ...)`` and ``stage_body(NAME, ...)``
    call in ``source``; the name is None when it is neither a string nor a module-level string
    constant."""
    tree = ast.parse(source)
    constants = _constants(tree)
    found: list[tuple[int, str | None]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and _records(node.func)):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((node.lineno, first.value))
        elif isinstance(first, ast.Name):
            found.append((node.lineno, constants.get(first.id)))
        else:
            found.append((node.lineno, None))
    return found


def _calls() -> list[tuple[str, int, str | None]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE.parent).as_posix() in FORWARDERS:
            continue
        for line, name in recorded_names(path.read_text(encoding="utf-8")):
            out.append((path.relative_to(PACKAGE.parent).as_posix(), line, name))
    return out


def test_every_recorded_stage_name_is_declared():
    calls = _calls()
    assert len(calls) > 20  # the scan found the stages' runs
    names = {name for _, _, name in calls}
    assert {"battles_export", "validate_import", "import_images", "select"} <= names
    bad = [f"{where}:{line}: {name!r}" for where, line, name in calls if name not in STAGES]
    assert not bad, "runs recorded under a name the catalogue does not declare: " + ", ".join(bad)


def test_command_stages_are_declared_but_run_by_their_command_only():
    """Declared (status, help, require_inputs), not in STAGE_NAMES (no verb of their name,
    not `Study.run`) and in no run order (`corpus-audit run` runs what it ran before)."""
    assert set(COMMAND_STAGES) <= set(STAGES.names())
    assert not set(COMMAND_STAGES) & set(STAGE_NAMES)
    assert [n for n in STAGES.names() if n not in COMMAND_STAGES] == STAGE_NAMES
    assert not {n for order in RUN_ORDERS.values() for n in order} & set(COMMAND_STAGES)


SNIPPETS = {
    "a literal": (
        'with study.stage("battles_exprot", "study") as run:\n    pass\n',
        "battles_exprot",
    ),
    "a constant": (
        'STAGE = "arena_import"\nwith study.stage(STAGE) as run:\n    pass\n',
        "arena_import",
    ),
    "computed": ('with study.stage(f"{kind}_import") as run:\n    pass\n', None),
    "the runner": ('@stage_body("selekt")\ndef body(study, run):\n    pass\n', "selekt"),
}


@pytest.mark.parametrize("source, name", SNIPPETS.values(), ids=SNIPPETS.keys())
def test_the_scan_reads_the_name_or_says_it_cannot(source: str, name: str | None):
    assert recorded_names(source) == [(1 if "STAGE =" not in source else 2, name)]
    assert name not in STAGES
