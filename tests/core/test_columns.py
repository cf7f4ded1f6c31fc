"""Column headers come from metrics.py: no header text written by hand in a template."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from corpus_audit.core.metrics import COLUMNS, METRICS, arrow_legend, header

TEMPLATES = [
    ("corpus_audit.report", "templates/report.html.j2"),
    ("corpus_audit.report", "templates/amplify.html.j2"),
    ("corpus_audit.report", "templates/summary.html.j2"),
    ("corpus_audit.report", "templates/neighbors.html.j2"),
]


def _template(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


@pytest.mark.parametrize(("package", "name"), TEMPLATES)
def test_every_header_comes_from_the_column_table(package: str, name: str) -> None:
    text = _template(package, name)
    cells = re.findall(r"<th[^>]*>(.*?)</th>", text)
    assert cells
    for cell in cells:
        # a column header, a per-prompt header built from one, or a row label (the model)
        assert "col(" in cell or cell in ("{{ block.model }}",), f"{name}: <th>{cell}</th>"
    for key in re.findall(r'col\("([^"]+)"', text):
        assert key in COLUMNS, f"{name}: col({key!r}) is not in metrics.COLUMNS"


def test_headers_carry_their_metric_direction() -> None:
    assert header("amplification") == "A ↑"
    assert header("mean_A") == "mean A ↑"
    assert header("percent_female") == "%female ↕"
    assert header("training_T") == "T ↕"
    assert header("captions") == "captions"  # a count: no metric, no arrow
    assert header("pct_any_indicator") == "% any indicator"  # descriptive metric: no arrow
    assert header("bootstrap_interval", pct="95") == "bootstrap 95 % interval"
    assert header("#1") == "#1"  # not a column of the table: shown as it is


def test_every_column_metric_exists_and_every_arrow_is_explained() -> None:
    for column in COLUMNS.values():
        assert column.metric is None or column.metric in METRICS
    marks = dict(arrow_legend())
    for column in COLUMNS.values():
        assert not column.arrow or column.arrow in marks
    assert marks["↑"] == "higher = more biased"


def test_cli_table_headers_come_from_metrics(capsys) -> None:
    from corpus_audit.commands.verbs.output import print_table as _print_table

    _print_table([{"occupation": "nurse", "mean_A": 1.5, "percent_female": 80.0}])
    first = capsys.readouterr().out.splitlines()[0]
    assert first.split("  ")[0] == "occupation"
    assert "mean A ↑" in first and "%female ↕" in first
