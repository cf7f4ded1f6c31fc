"""Issue 23, item 3: a skipped ``variants`` run clears the results of an earlier config.

When the configured variants no longer give a comparison (``variants.columns = {}``, or a
column that is all NULL), the stage used to say "skipped" and leave the old
``caption_variants``, ``variant_*`` tables and ``report/variants/*.csv`` in place, shown as
this config's. Also: ``variants.columns`` naming an integer column names that setting, not
``corpus.text_column``.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pandas as pd
import pytest

from corpus_audit.cli import main
from corpus_audit.core.pipeline import init_study
from corpus_audit.core.store import Study
from corpus_audit.stages.variants.compare import TABLES

VARIANT_TABLES = ("caption_variants", "variant_mentions", *TABLES.values())


def _cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["-q", *args])
    return code, err.getvalue()


@pytest.fixture
def compared(coco_path, tmp_path) -> tuple[Path, pd.DataFrame]:
    """A study comparing COCO's second caption of each image with its first (3,000 images)."""
    coco = pd.read_parquet(coco_path, columns=["caption_id", "image_id", "caption"])
    coco = coco.sort_values(["image_id", "caption_id"], kind="stable")
    first = coco.groupby("image_id").nth(0).set_index("image_id")["caption"]
    second = coco.groupby("image_id").nth(1).set_index("image_id")["caption"]
    wide = pd.DataFrame(
        {
            "image_id": first.index,
            "caption1": first.to_numpy(),
            "caption2": second.loc[first.index].to_numpy(),
        }
    ).head(3000)
    wide.to_parquet(tmp_path / "coco.parquet", index=False)
    settings = {
        "indicators": {"use_names": False},
        "variants": {"columns": {"caption2": "caption2"}, "similarity": False},
        "corpus": {"text_column": "caption1"},
    }
    root = tmp_path / "s"
    init_study(root, [str(tmp_path / "coco.parquet")], overrides=settings).close()
    for command in ("select", "variants"):
        code, err = _cli(command, str(root))
        assert code == 0, err
    with Study.open(root) as study:
        assert study.count("caption_variants") > 0 and study.count("variant_differences") > 0
    assert list((root / "report" / "variants").glob("*.csv"))
    return root, wide


def _assert_cleared(root: Path) -> None:
    with Study.open(root) as study:
        assert {t: study.count(t) for t in VARIANT_TABLES} == dict.fromkeys(VARIANT_TABLES, 0)
        assert study.last_run("variants")["status"] == "skipped"
    assert not list((root / "report" / "variants").glob("*.csv"))


def test_variants_columns_emptied_clears_the_old_results(compared):
    root, _ = compared
    toml = root / "study.toml"
    text = toml.read_text(encoding="utf-8")
    assert 'columns = {caption2 = "caption2"}' in text
    toml.write_text(text.replace('columns = {caption2 = "caption2"}', "columns = {}"))
    code, err = _cli("variants", str(root))
    assert code == 0, err
    _assert_cleared(root)


def test_variant_column_all_null_clears_the_old_results(compared, tmp_path):
    root, wide = compared
    wide.assign(caption2=pd.Series([None] * len(wide), dtype="string")).to_parquet(
        tmp_path / "coco.parquet", index=False
    )
    code, err = _cli("variants", str(root))
    assert code == 0, err
    _assert_cleared(root)


def test_integer_variant_column_names_the_variants_setting(compared):
    root, _ = compared
    toml = root / "study.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text.replace('{caption2 = "caption2"}', '{caption2 = "image_id"}'))
    code, err = _cli("variants", str(root))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "set variants.columns.caption2 to" in err and "corpus.text_column" not in err
