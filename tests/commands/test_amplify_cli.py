"""`corpus-audit amplify --training T.csv --generated G.csv`: amplification from plain tables."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from corpus_audit.cli import main
from corpus_audit.commands.amplify import amplify_tables
from corpus_audit.core.errors import CorpusAuditError

TRAINING = "occupation,percent_female,n\nnurse,80,50\nEngineer,20,40\nteacher,50,30\npilot,30,20\n"
# prompt 1: A = 10, 10, 10, pilot switches sides (excluded); prompt 2: A = -10, -10, 0, 10.
GENERATED = (
    "occupation,prompt,percent_female,n\n"
    "nurse,1,90,100\nengineer,1,10,100\nteacher,1,60,100\npilot,1,60,100\n"
    "nurse,2,70,100\nengineer,2,30,100\nteacher,2,50,100\npilot,2,20,100\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_amplify_prints_means_and_writes_tables(tmp_path: Path, capsys):
    t = _write(tmp_path, "T.csv", TRAINING)
    g = _write(tmp_path, "G.csv", GENERATED)
    out = tmp_path / "out"
    assert main(["amplify", "--training", str(t), "--generated", str(g), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "[amplify] done: 8 in, 7 out" in printed
    assert "dropped 1: direction_switch" in printed
    assert "excluded: pilot / prompt 1: T=30.0, G=60.0 (direction_switch)" in printed
    lines = {line.split()[0]: line.split() for line in printed.splitlines() if line.strip()}
    assert lines["1"][1:4] == ["3", "1", "10.000"]  # prompt, included, excluded, mean A
    assert lines["2"][1:4] == ["4", "0", "-2.500"]
    assert "average (2 prompts)" in printed and "3.750" in printed  # mean of the two means

    summary = _read(out / "summary.csv")
    assert [r["prompt"] for r in summary] == ["1", "2", "average (2 prompts)"]
    assert float(summary[2]["mean_A"]) == pytest.approx(3.75)
    lo, hi = float(summary[2]["ci_low"]), float(summary[2]["ci_high"])
    assert lo < 3.75 < hi  # n given in both files: bootstrap interval
    assert summary[0]["t"] == ""  # prompt 1: three identical A values, t undefined
    assert float(summary[1]["p"]) == pytest.approx(0.6376, abs=1e-3)  # t-test of -10,-10,0,10
    pairs = _read(out / "amplification.csv")
    assert len(pairs) == 8
    eng = next(r for r in pairs if r["occupation"] == "engineer" and r["prompt"] == "1")
    assert float(eng["amplification"]) == pytest.approx(10.0) and eng["excluded"] == "false"
    excluded = _read(out / "excluded.csv")
    assert [(r["occupation"], r["prompt"], r["exclude_reason"]) for r in excluded] == [
        ("pilot", "1", "direction_switch")
    ]


def test_amplify_without_n_has_no_intervals(tmp_path: Path):
    t = _write(tmp_path, "T.csv", "occupation,percent_female\nnurse,80\nengineer,20\n")
    g = _write(
        tmp_path,
        "G.csv",
        "occupation,prompt,percent_female\nnurse,A photo of a nurse,90\n"
        "engineer,A photo of a nurse,5\n",
    )
    run = amplify_tables(t, g, tmp_path / "o")
    assert run.summary[0]["prompt"] == "A photo of a nurse"
    assert run.summary[0]["mean_A"] == pytest.approx((10 + 15) / 2)
    assert run.summary[0]["ci_low"] is None
    assert any("no bootstrap intervals" in m for m in run.messages)


def test_amplify_ties_at_50_and_empty_cells(tmp_path: Path):
    t = _write(tmp_path, "T.csv", "occupation,percent_female,n\nnurse,50,10\njanitor,,0\n")
    g = _write(
        tmp_path,
        "G.csv",
        "occupation,prompt,percent_female,n\nnurse,1,70,10\njanitor,1,30,10\n",
    )
    run = amplify_tables(t, g, tmp_path / "o")
    rows = {r["occupation"]: r for r in _read(tmp_path / "o" / "amplification.csv")}
    assert rows["nurse"]["excluded"] == "false"  # T exactly 50 is no side: kept
    assert float(rows["nurse"]["amplification"]) == pytest.approx(20.0)
    assert rows["janitor"]["exclude_reason"] == "no_training_labels"
    assert run.dropped == {"no_training_labels": 1}


def test_amplify_default_out_dir(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = _write(tmp_path, "T.csv", "occupation,percent_female\nnurse,80\n")
    g = _write(tmp_path, "G.csv", "occupation,prompt,percent_female\nnurse,1,90\n")
    run = amplify_tables(t, g)
    assert Path(run.outputs["summary_csv"]).resolve() == (
        tmp_path / "amplify_results" / "summary.csv"
    )


@pytest.mark.parametrize(
    ("training", "generated", "message"),
    [
        ("occupation,pct\nnurse,80\n", None, r"T\.csv: missing column\(s\) 'percent_female'"),
        (None, "occupation,percent_female\nnurse,80\n", r"G\.csv: missing column\(s\) 'prompt'"),
        (
            "occupation,percent_female\nnurse,eighty\n",
            None,
            r"T\.csv:2: column 'percent_female': 'eighty' is not a number",
        ),
        (
            "occupation,percent_female\nnurse,80\nchef,101\n",
            None,
            r"T\.csv:3: percent_female 101 is not in \[0, 100\]",
        ),
        ("occupation,percent_female\nnurse,-1\n", None, r"T\.csv:2: .*not in \[0, 100\]"),
        ("occupation,percent_female\nnurse,nan\n", None, r"T\.csv:2: .*not a finite number"),
        (
            None,
            "occupation,prompt,percent_female\nnurse,1,80\nsurgeon,1,40\n",
            r"G\.csv:3: occupation 'surgeon' is not in the training table",
        ),
        (
            "occupation,percent_female\nnurse,80\nNurse,70\n",
            None,
            r"T\.csv:3: duplicate occupation 'nurse' \(first on line 2\)",
        ),
        (
            None,
            "occupation,prompt,percent_female\nnurse,1,80\nnurse,1,70\n",
            r"G\.csv:3: duplicate occupation 'nurse', prompt '1'",
        ),
        ("occupation,percent_female,n\nnurse,80,2.5\n", None, r"T\.csv:2: n '2\.5' is not a whole"),
        ("occupation,percent_female,n\nnurse,80,-3\n", None, r"T\.csv:2: n '-3' is not a whole"),
        ("occupation,percent_female\nnurse\n", None, r"T\.csv:2: 1 fields, the header has 2"),
        ("", None, r"T\.csv: empty file"),
        ("occupation,percent_female\n", None, r"T\.csv: no data rows"),
        ("occupation,percent_female\n,80\n", None, r"T\.csv:2: empty occupation"),
    ],
)
def test_bad_tables_name_file_and_row(tmp_path: Path, capsys, training, generated, message):
    t = _write(
        tmp_path,
        "T.csv",
        training if training is not None else "occupation,percent_female\nnurse,80\n",
    )
    g = _write(
        tmp_path,
        "G.csv",
        generated if generated is not None else "occupation,prompt,percent_female\nnurse,1,80\n",
    )
    with pytest.raises(CorpusAuditError, match=message):
        amplify_tables(t, g, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written for a bad input
    # The CLI prints the same as one line and exits with status 2.
    assert main(["amplify", "--training", str(t), "--generated", str(g)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err


def test_missing_and_undecodable_files(tmp_path: Path):
    g = _write(tmp_path, "G.csv", "occupation,prompt,percent_female\nnurse,1,80\n")
    with pytest.raises(CorpusAuditError, match=r"nope\.csv: no such file"):
        amplify_tables(tmp_path / "nope.csv", g)
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("occupation,percent_female\ncaf\xe9,80\n".encode("latin-1"))
    with pytest.raises(CorpusAuditError, match=r"latin1\.csv: not UTF-8"):
        amplify_tables(bad, g)


def test_entry_point_runs(tmp_path: Path):
    t = _write(tmp_path, "T.csv", TRAINING)
    g = _write(tmp_path, "G.csv", GENERATED)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "corpus_audit.cli",
            "-q",
            "amplify",
            "--training",
            str(t),
            "--generated",
            str(g),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "average (2 prompts)" in proc.stdout
    assert (tmp_path / "o" / "summary.csv").is_file()
