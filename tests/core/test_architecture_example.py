"""docs/architecture.md shows real code: every ``<!-- example: FILE FUNCTION -->`` block is the
function's source, verbatim (so the page cannot drift from the code it explains)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
MARKER = re.compile(r"<!-- example: (\S+) (\w+) -->\n```python\n(.*?)\n```", re.S)


def function_source(path: Path, name: str) -> str | None:
    """The source of the top-level function ``name`` in ``path``; None when there is none."""
    source = path.read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(source, node)
    return None


def examples(page: str) -> list[tuple[str, str, str]]:
    """``(file, function, shown code)`` for every marked example block of ``page``."""
    return MARKER.findall(page)


def test_the_page_has_an_example_and_each_is_the_code() -> None:
    found = examples(PAGE.read_text(encoding="utf-8"))
    assert found, f"{PAGE}: no <!-- example: FILE FUNCTION --> block"
    for file, name, shown in found:
        code = function_source(ROOT / file, name)
        assert code is not None, f"{PAGE}: {file} has no function {name}"
        assert shown == code, f"{PAGE}: the example of {file}:{name} differs from the code"


def test_an_edited_example_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f(x):\n    return x + 1\n")
    page = f"<!-- example: {module} f -->\n```python\ndef f(x):\n    return x + 2\n```\n"
    ((file, name, shown),) = examples(page)
    assert function_source(Path(file), name) != shown
