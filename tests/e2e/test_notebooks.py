"""The notebooks in notebooks/ run from top to bottom in a real Jupyter kernel (nbclient +
ipykernel) and end in the table or figure each is for; each result is checked here.

They use only the public API (``from corpus_audit import ...``: checked on their source) and
the data that ships with the package or its test dependencies (the paper's published tables,
the bundled captions, the BAFIS votes, scikit-image's photos), so they run offline.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the dev extra: nbformat, nbclient, ipykernel")
nbclient = pytest.importorskip("nbclient")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
TIMEOUT_S = 240  # per cell


def _execute(name: str, monkeypatch, tmp_path: Path):
    """Run ``notebooks/<name>`` in a fresh kernel that imports this checkout's package."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' temporary studies
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    return [c for c in notebook.cells if c.cell_type == "code"]


def _text(cell) -> str:
    """Everything a cell showed as text (printed and its result's plain repr)."""
    out = []
    for output in cell.outputs:
        if output.get("output_type") == "stream":
            out.append(output["text"])
        elif "data" in output:
            out.append(output["data"].get("text/plain", ""))
    return "\n".join(out)


def _has_png(cell) -> bool:
    return any("image/png" in output.get("data", {}) for output in cell.outputs)


def test_notebooks_use_only_the_public_api():
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == [
        "bafis_leaderboard.ipynb",
        "image_audit.ipynb",
        "paper_tables.ipynb",
        "who_vs_how.ipynb",
    ]
    for name in names:
        notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            assert "sys.path" not in cell.source, name
            python = "\n".join(
                line for line in cell.source.splitlines() if not line.startswith("%")
            )  # IPython magics (%matplotlib inline) are not Python
            for node in ast.walk(ast.parse(python)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corpus_"):
                    assert node.module == "corpus_audit", (name, node.module)
                    assert all(not a.name.startswith("_") for a in node.names), name
                if isinstance(node, ast.Import):
                    assert all(not a.name.startswith("corpus_audit.") for a in node.names), name


def test_paper_tables(monkeypatch, tmp_path):
    cells = _execute("paper_tables.ipynb", monkeypatch, tmp_path)
    table3 = _text(cells[1])
    assert "Stable Diffusion 1.4" in table3 and "Stable Diffusion 1.5" in table3
    assert "mean_A_published" in table3
    found = re.search(r"largest difference from the paper: ([0-9.]+) points", _text(cells[2]))
    assert found and float(found.group(1)) < 0.15  # the tables are rounded to 0.1
    assert _has_png(cells[-1])  # the scatter


def test_who_vs_how(monkeypatch, tmp_path):
    cells = _execute("who_vs_how.ipynb", monkeypatch, tmp_path)
    assert "texts_who" in _text(cells[0])
    who = _text(cells[1])
    assert "pct_women" in who and "labor_pct_women" in who
    assert re.search(r"\bman\b|\bwoman\b|player|chef|cook|doctor", who)  # occupations listed
    # COCO places no occupation in a decile (at most 2 associated captions each): no figure
    assert "no decile figure: no occupation has 10 associated captions" in _text(cells[-1])
    assert not _has_png(cells[-1])


def test_bafis_leaderboard(monkeypatch, tmp_path):
    cells = _execute("bafis_leaderboard.ipynb", monkeypatch, tmp_path)
    overall = _text(cells[-1])
    for model in ("dall-e-3", "flux-1-dev", "midjourney", "playground", "stable-diffusion-3"):
        assert model in overall
    for aspect in ("bias", "image_quality", "prompt_alignment"):
        assert aspect in overall


def test_image_audit(monkeypatch, tmp_path):
    cells = _execute("image_audit.ipynb", monkeypatch, tmp_path)
    assert _text(cells[1]).strip() == "8"  # eight images imported
    assert "agegender" in _text(cells[2])
    # the model-only table: nurse pooled over both prompts (4 of 8 female) beside BLS 2024 87.9 %
    pooled = _text(cells[3])
    assert re.search(r"nurse\s+8\s+4\s+4\s+0\s+0\b", pooled), pooled  # pandas may wrap
    assert "50.0" in pooled and "87.9" in pooled
    assert _has_png(cells[4])  # generated vs labour %female
    assert "report.html True" in pooled  # study.report() rendered the page
    # index, prompt_id, n_images, n_female, n_male, percent_female (pandas may wrap the rest)
    rows = re.findall(r"^\d+\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)", _text(cells[-1]), re.M)
    # astronaut x3 + camera man x1, then the reverse: 75 % and 25 % female
    assert sorted(rows, key=lambda r: float(r[3])) == [
        ("4", "1", "3", "25.0"),
        ("4", "3", "1", "75.0"),
    ]
