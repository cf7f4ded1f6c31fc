"""Corpus groups (corpus.groups, corpus.hypernymized) and the per-corpus table they make.

The rule is pure (corpus_audit/methods/corpus_groups.py); the end-to-end part runs the real
select and indicators stages (gender words and pronouns; no spaCy names, to stay fast) on
real LAION and COCO captions through the CLI.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from corpus_audit.cli import main
from corpus_audit.core.config import load_config, write_config
from corpus_audit.core.errors import ConfigError
from corpus_audit.methods.corpus_groups import assign_groups, group_of, is_paper_group

FILES = [
    (0, "/data/laion/part-0.parquet", "laion/part-0.parquet"),
    (1, "/data/laion/part-1.parquet", "laion/part-1.parquet"),
    (2, "/data/coco/part-0.parquet", "coco/part-0.parquet"),
    (3, "/data/cc3m.parquet", "cc3m.parquet"),
]


def test_first_matching_glob_wins_and_unmatched_files_are_their_own_group():
    globs = {"*/laion/*": "LAION", "part-0.parquet": "zero", "*.parquet": "rest"}
    assert [group_of(p, k, globs) for _, p, k in FILES] == ["LAION", "LAION", "zero", "rest"]
    assert [group_of(p, k, {}) for _, p, k in FILES] == [k for _, _, k in FILES]
    assert group_of("/x/Laion.parquet", "Laion.parquet", {"laion*": "L"}) == "Laion.parquet"


def test_hypernymized_flags_its_group_and_a_typo_is_one_clear_error():
    got = assign_groups(FILES, {"*cc3m*": "CC3M"}, ["CC3M"])
    assert [(g.file_id, g.group, g.hypernymized) for g in got][-1] == (3, "CC3M", True)
    assert not any(g.hypernymized for g in got[:-1])
    with pytest.raises(ConfigError) as err:
        assign_groups(FILES, {"*cc3m*": "CC3M"}, ["CC3m"], source="s/study.toml")
    assert str(err.value).startswith("s/study.toml: corpus.hypernymized names 'CC3m'")
    assert "\n" not in str(err.value)


def test_the_paper_group_is_the_laion_one():
    assert is_paper_group("LAION-400M") and is_paper_group("laion_sample")
    assert not is_paper_group(None) and not is_paper_group("COCO") and not is_paper_group("")


def _summary(root: Path) -> dict[tuple, tuple]:
    with duckdb.connect(str(root / "study.duckdb"), read_only=True) as con:
        return {
            (g, o): (c, h)
            for g, o, c, h in con.execute(
                "SELECT corpus_group, occupation, captions, hypernymized FROM corpus_summary"
            ).fetchall()
        }


def test_regrouping_reruns_indicators_only_for_the_table(make_study, laion_path, coco_path, capsys):
    """Files -> groups -> corpus_summary through the CLI: the default groups are the file
    names; a new corpus.groups makes indicators stale in status, its rerun rewrites the table
    without relabelling; a hypernymized name that is no group exits 2 in one line and
    leaves the table as it was."""
    study = make_study(
        [laion_path, coco_path], select={"sample_size": 5}, indicators={"use_names": False}
    )
    root = study.root
    study.close()
    assert main(["-q", "select", str(root)]) == 0
    assert main(["-q", "indicators", str(root)]) == 0
    first = _summary(root)
    groups = {g for g, _ in first}
    assert groups == {laion_path.name, coco_path.name, None}
    with duckdb.connect(str(root / "study.duckdb"), read_only=True) as con:
        labels = con.execute("SELECT * FROM indicators ORDER BY caption_id").fetchall()
        by_file = dict(
            con.execute("SELECT caption_id >> 40, count(*) FROM captions GROUP BY ALL").fetchall()
        )
        files = dict(con.execute("SELECT path, file_id FROM corpus_files").fetchall())
    assert first[(laion_path.name, None)][0] == by_file[files[str(laion_path.resolve())]]
    assert first[(None, None)][0] == sum(by_file.values())

    config = load_config(root)
    config.corpus.groups = {"laion*": "LAION", "*.parquet": "other"}
    config.corpus.hypernymized = ["other"]
    write_config(config)
    capsys.readouterr()
    assert main(["status", str(root)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("indicators"))
    assert "config changed since this run" in line
    assert main(["-q", "indicators", str(root)]) == 0
    second = _summary(root)
    assert second[("LAION", None)] == (first[(laion_path.name, None)][0], False)
    assert second[("other", None)] == (first[(coco_path.name, None)][0], True)
    assert second[(None, None)] == (first[(None, None)][0], True)
    with duckdb.connect(str(root / "study.duckdb"), read_only=True) as con:
        assert con.execute("SELECT * FROM indicators ORDER BY caption_id").fetchall() == labels

    config.corpus.hypernymized = ["COCO"]
    write_config(config)
    capsys.readouterr()
    assert main(["-q", "indicators", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert "corpus.hypernymized names 'COCO', which is no corpus group" in err
    assert "study.toml" in err and len(err.splitlines()) == 1
    assert _summary(root) == second
    with duckdb.connect(str(root / "study.duckdb"), read_only=True) as con:
        last = con.execute(
            "SELECT status FROM stage_runs WHERE stage = 'indicators' ORDER BY finished_at DESC"
        ).fetchall()[0][0]
        unfinished = con.execute("SELECT count(*) FROM stage_unfinished").fetchall()[0][0]
    assert last == "done" and unfinished == 0  # the failed run left no mark, no partial state
