"""The paper's published tables replayed through `corpus-audit amplify` (METHODS 1.7).

`../shared/data/seed003_published/` holds the paper's per-occupation %female (Seshadri, Singh &
Elazar, Tables 6 and 7: SD 1.4 and SD 1.5, training and four prompts). Table 3 of the paper
gives the naive strategy's mean amplification per prompt and the average:

    SD 1.4: 10.24 / 17.57 / 10.77 / 11.68, average 12.57
    SD 1.5: 10.87 / 16.36 / 11.15 /  9.91, average 12.07

The tables are rounded to 0.1, so a mean over ~45 occupations can move by up to 0.05 against
the paper's unrounded computation (typically < 0.01): we ask for the paper's numbers within
0.01 (they agree to two decimals, or differ by one unit in the second). The rule matters far
more than that: with the strict rule (exactly 50 on no side) SD 1.5's prompt #3 comes out
10.78 and its average 11.98, because athlete (T = 44.8, G = 50.0) is then kept.

Expected values are computed here from the TSV with exact fractions, independently of the
code under test; the test reads the numbers `corpus-audit amplify` prints.
"""

from __future__ import annotations

import csv
import re
from fractions import Fraction
from pathlib import Path

import pytest

from corpus_audit.cli import main

PAPER_TABLE3 = {
    "sd14": {"prompt1": 10.24, "prompt2": 17.57, "prompt3": 10.77, "prompt4": 11.68, "avg": 12.57},
    "sd15": {"prompt1": 10.87, "prompt2": 16.36, "prompt3": 11.15, "prompt4": 9.91, "avg": 12.07},
}
PROMPTS = ("prompt1", "prompt2", "prompt3", "prompt4")
# The paper: these five occupations switch direction for every prompt in both models.
ALWAYS_SWITCH = ["assistant", "author", "dentist", "painter", "supervisor"]


def _tables(shared_data: Path) -> dict[str, Path]:
    folder = shared_data / "seed003_published"
    return {m: folder / f"percent_female_{m}.tsv" for m in ("sd14", "sd15")}


def _expected(path: Path, rule: str) -> tuple[dict[str, Fraction], set[tuple[str, str]]]:
    """Per-prompt means and the average with exact fractions; the excluded (occ, prompt)."""
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    means: dict[str, Fraction] = {}
    excluded: set[tuple[str, str]] = set()
    for prompt in PROMPTS:
        values = []
        for r in rows:
            t, g = Fraction(r["training"]), Fraction(r[prompt])
            switch = (t < 50) != (g < 50) if rule == "upper" else (t - 50) * (g - 50) < 0
            if switch:
                excluded.add((r["occupation"].replace("_", " "), prompt))
            else:
                values.append(abs(g - 50) - abs(t - 50))
        means[prompt] = sum(values, Fraction(0)) / len(values)
    means["avg"] = sum((means[p] for p in PROMPTS), Fraction(0)) / len(PROMPTS)
    return means, excluded


def _printed_means(out: str) -> dict[tuple[str, str], float]:
    """(model, prompt or 'avg') -> mean A from the summary table `amplify` prints."""
    found = {}
    for line in out.splitlines():
        m = re.match(r"(sd1[45])\s+(prompt\d|average \(4 prompts\))\s+\d+\s+\d+\s+(-?[\d.]+)", line)
        if m:
            key = "avg" if m.group(2).startswith("average") else m.group(2)
            found[(m.group(1), key)] = float(m.group(3))
    return found


def _csv_means(out_dir: Path) -> dict[tuple[str, str], float]:
    """(model, prompt or 'avg') -> mean A from summary.csv (6 significant digits)."""
    with (out_dir / "summary.csv").open(encoding="utf-8") as fh:
        return {
            (r["model"], "avg" if r["prompt"].startswith("average") else r["prompt"]): float(
                r["mean_A"]
            )
            for r in csv.DictReader(fh)
        }


def _amplify(shared_data: Path, tmp_path: Path, capsys, *extra: str) -> str:
    """`corpus-audit -v amplify` over the published tables (-v: the per-prompt table and every
    note, as a reader checking them against the paper asks for); what it printed."""
    tables = _tables(shared_data)
    args = ["-v", "amplify", "--out", str(tmp_path / "out"), "--training-n", "500", *extra]
    for name, path in tables.items():
        args += ["--table", f"{name}={path}"]
    capsys.readouterr()
    assert main(args) == 0
    return capsys.readouterr().out


def test_amplify_reproduces_the_papers_table3(shared_data: Path, tmp_path: Path, capsys):
    out = _amplify(shared_data, tmp_path, capsys)
    printed = _printed_means(out)
    written = _csv_means(tmp_path / "out")
    assert len(printed) == len(written) == 10, out
    for model, path in _tables(shared_data).items():
        expected, _ = _expected(path, "upper")
        for key, paper in PAPER_TABLE3[model].items():
            exact = float(expected[key])
            assert printed[(model, key)] == pytest.approx(exact, abs=6e-4)  # printed: 3 decimals
            ours = written[(model, key)]
            assert ours == pytest.approx(exact, rel=1e-5)
            assert abs(round(ours, 2) - paper) <= 0.01 + 1e-9, (model, key, ours, paper)
    # To two decimals exactly where the rounded inputs allow it; the rest differ by 0.01:
    # SD 1.4 average 12.563 (the paper's 12.57 is the mean of its rounded per-prompt means,
    # 12.565), SD 1.5 prompt #1 10.859 (10.87) and prompt #3 11.140 (11.15).
    for model, key in (("sd15", "avg"), ("sd15", "prompt2"), ("sd15", "prompt4")):
        assert round(written[(model, key)], 2) == PAPER_TABLE3[model][key]
    for key in PROMPTS:
        assert round(written[("sd14", key)], 2) == PAPER_TABLE3["sd14"][key]


def test_amplify_lists_the_excluded_pairs(shared_data: Path, tmp_path: Path, capsys):
    out = _amplify(shared_data, tmp_path, capsys)
    assert f"excluded for every prompt of every table: {', '.join(ALWAYS_SWITCH)}" in out
    with (tmp_path / "out" / "excluded.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for model, path in _tables(shared_data).items():
        _, expected = _expected(path, "upper")
        got = {(r["occupation"], r["prompt"]) for r in rows if r["model"] == model}
        assert got == expected
        assert all(r["exclude_reason"] == "direction_switch" for r in rows)
    athlete = [r for r in rows if r["model"] == "sd15" and r["occupation"] == "athlete"]
    assert {r["prompt"] for r in athlete} == {"prompt1", "prompt3", "prompt4"}
    g3 = next(r for r in athlete if r["prompt"] == "prompt3")
    assert float(g3["training_pf"]) == 44.8 and float(g3["generated_pf"]) == 50.0


def test_strict_rule_gives_other_numbers(shared_data: Path, tmp_path: Path, capsys):
    out = _amplify(shared_data, tmp_path, capsys, "--parity-side", "neither")
    assert "exactly 50 is on no side (strict rule)" in out
    written = _csv_means(tmp_path / "out")
    expected, excluded = _expected(_tables(shared_data)["sd15"], "neither")
    assert ("athlete", "prompt3") not in excluded
    assert written[("sd15", "prompt3")] == pytest.approx(float(expected["prompt3"]), rel=1e-5)
    assert round(written[("sd15", "prompt3")], 2) == 10.78
    assert round(written[("sd15", "avg")], 2) == 11.98  # what corpus_audit printed before
    assert abs(written[("sd15", "prompt3")] - PAPER_TABLE3["sd15"]["prompt3"]) > 0.3


def test_report_page_holds_both_tables(shared_data: Path, tmp_path: Path, capsys):
    out = _amplify(shared_data, tmp_path, capsys, "--report")
    page = (tmp_path / "out" / "amplification.html").read_text(encoding="utf-8")
    assert "report: " in out
    assert page.count('class="amplify-table"') == 2
    assert page.count("data:image/png;base64,") == 2  # one scatter grid per model
    assert "11.14" in page and "12.07" in page  # SD 1.5 prompt 3 and average, two decimals
    assert "graphic designer" in page  # underscores of the TSV read as spaces
    # Training values carry n = 500: each has a Wilson interval (athlete 44.8 % of 500).
    from scipy.stats import binomtest

    ci = binomtest(224, 500).proportion_ci(0.95, method="wilson")
    assert f"[{100 * ci.low:.1f}, {100 * ci.high:.1f}]" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
