"""The README and docs/ speak to users: no internal references (the project's issue numbers,
the shared folder, the internal method and design notes), the README starts with the two
commands a fresh machine runs, and every link from the README, the docs, the package's
messages and its page templates resolves to a file the wheel ships (docs/*.md are installed
under <prefix>/share/doc/corpus_audit/docs, see pyproject.toml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md"))
INTERNAL = re.compile(r"\b[Ii]ssues? #?\d+|\.\./shared|METHODS|ARCHITECTURE\.md")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# the screenshots the report work adds (docs/images/); linked from the README
SCREENSHOTS = {"docs/images/report_demo.png", "docs/images/report_model_only.png"}


@pytest.mark.parametrize("path", [REPO / "README.md", *DOCS], ids=lambda p: p.name)
def test_no_internal_references(path: Path):
    hits = [
        f"{path.name}:{n}: {m.group(0)}"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for m in INTERNAL.finditer(line)
    ]
    assert hits == []


def test_the_grep_finds_what_it_looks_for():
    for text in ("see issue 33", "Issues 17", "../shared/data", "METHODS §2", "ARCHITECTURE.md"):
        assert INTERNAL.search(text), text
    assert not INTERNAL.search("the issues of a corpus; round 4")


def test_the_readme_starts_with_make_demo_and_make_test():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[2] == "```sh"
    assert lines[3].startswith("make demo   # ") and lines[4].startswith("make test   # ")
    assert len(lines) < 300


@pytest.mark.parametrize("path", [REPO / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(path: Path):
    broken = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        resolved = (path.parent / target).resolve()
        rel = resolved.relative_to(REPO).as_posix() if resolved.is_relative_to(REPO) else target
        if rel in SCREENSHOTS:
            continue  # checked below
        if not resolved.exists():
            broken.append(target)
    assert broken == []


def test_the_readme_links_both_screenshots():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for shot in SCREENSHOTS:
        assert f"]({shot})" in text


def test_docs_named_by_the_package_exist():
    """A message or page naming docs/NAME.md names a page the wheel installs."""
    named = set()
    for source in [*(REPO / "corpus_audit").rglob("*.py"), *(REPO / "corpus_audit").rglob("*.j2")]:
        named |= set(re.findall(r"docs/([A-Za-z0-9_-]+\.md)", source.read_text(encoding="utf-8")))
    assert named, "the package names no docs page: the pattern is wrong"
    missing = sorted(n for n in named if not (REPO / "docs" / n).is_file())
    assert missing == []


def test_the_wheel_installs_the_docs():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"share/doc/corpus_audit/docs" = ["docs/*.md"]' in text
