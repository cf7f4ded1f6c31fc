"""``corpus-audit amplify``: amplification from plain %female tables (CSV), no study needed.

Input files (UTF-8, header row, extra columns ignored, header names case-insensitive):

- training CSV: ``occupation,percent_female[,n]``, one row per occupation;
- generated CSV: ``occupation,prompt,percent_female[,n]``, one row per (occupation, prompt).

``percent_female`` is in [0, 100]; an empty cell means "no labelled image" (the pair is
then excluded, as is a row with ``n = 0``). ``n`` is the number of labelled images behind
the percentage; with ``n`` in every used row of both files the means get bootstrap intervals
(images resampled within each occupation), else they have none. Occupation names are
compared lower-cased with spaces collapsed. Any problem raises
:class:`~corpus_audit.errors.CorpusAuditError` naming the file and line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from corpus_audit.analysis.amplification import (
    Pair,
    Rate,
    make_pair,
    summarize,
)
from corpus_audit.errors import CorpusAuditError
from corpus_audit.metrics import metric
from corpus_audit.store import StageRun

DEFAULT_OUT = Path("amplify_results")


class TableError(CorpusAuditError):
    """A %female table (CSV) that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class TableRow:
    """One parsed row: %female (None = no data) and n (None = not given)."""

    occupation: str
    prompt: str | None
    percent_female: float | None
    n: int | None
    line: int


def _norm(name: str) -> str:
    return " ".join(name.strip().lower().split())


def _number(path: Path, line: int, column: str, raw: str) -> float | None:
    text = raw.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise TableError(f"{path}:{line}: column '{column}': {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise TableError(f"{path}:{line}: column '{column}': {raw!r} is not a finite number")
    return value


def read_table(path: Path, *, with_prompt: bool) -> list[TableRow]:
    """Parse and validate one CSV (see the module docstring for the format)."""
    path = Path(path)
    required = (
        ["occupation", "prompt", "percent_female"]
        if with_prompt
        else ["occupation", "percent_female"]
    )
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise TableError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TableError(f"{path}: is a directory, not a CSV file") from None
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise TableError(f"{path}: empty file (needs a header: {','.join(required)}[,n])")
    columns = [_norm(h) for h in header]
    missing = [c for c in required if c not in columns]
    if missing:
        raise TableError(
            f"{path}: missing column(s) {', '.join(repr(m) for m in missing)} "
            f"(header: {', '.join(header)}; needs {','.join(required)}[,n])"
        )
    index = {c: columns.index(c) for c in [*required, "n"] if c in columns}
    rows: list[TableRow] = []
    seen: dict[tuple[str, str | None], int] = {}
    for line, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue  # blank line
        if len(cells) < len(header):
            raise TableError(f"{path}:{line}: {len(cells)} fields, the header has {len(header)}")
        occupation = _norm(cells[index["occupation"]])
        if not occupation:
            raise TableError(f"{path}:{line}: empty occupation")
        prompt = cells[index["prompt"]].strip() if with_prompt else None
        if with_prompt and not prompt:
            raise TableError(f"{path}:{line}: empty prompt")
        pf = _number(path, line, "percent_female", cells[index["percent_female"]])
        if pf is not None and not 0.0 <= pf <= 100.0:
            raise TableError(f"{path}:{line}: percent_female {pf:g} is not in [0, 100]")
        n: int | None = None
        if "n" in index:
            raw_n = _number(path, line, "n", cells[index["n"]])
            if raw_n is not None:
                if raw_n < 0 or not float(raw_n).is_integer():
                    raise TableError(
                        f"{path}:{line}: n {cells[index['n']].strip()!r} is not a whole number >= 0"
                    )
                n = int(raw_n)
        if n == 0:
            pf = None  # no labelled image: no percentage, whatever the cell says
        key = (occupation, prompt)
        if key in seen:
            what = f"occupation '{occupation}'" + (f", prompt '{prompt}'" if with_prompt else "")
            raise TableError(f"{path}:{line}: duplicate {what} (first on line {seen[key]})")
        seen[key] = line
        rows.append(TableRow(occupation, prompt, pf, n, line))
    if not rows:
        raise TableError(f"{path}: no data rows")
    return rows


def amplify_pairs(
    training: list[TableRow], generated: list[TableRow], *, generated_path: Path
) -> list[Pair]:
    """Pairs of every generated row with its occupation's training row."""
    by_occ = {r.occupation: r for r in training}
    pairs = []
    for g in generated:
        t = by_occ.get(g.occupation)
        if t is None:
            raise TableError(
                f"{generated_path}:{g.line}: occupation '{g.occupation}' is not in the "
                "training table"
            )
        pairs.append(
            make_pair(
                g.occupation,
                g.prompt,
                Rate(("training", t.occupation), t.percent_female, t.n),
                Rate(("generated", g.occupation, g.prompt), g.percent_female, g.n),
            )
        )
    return pairs


def amplify_tables(
    training_csv: Path,
    generated_csv: Path,
    out_dir: Path | None = None,
    *,
    replicates: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> StageRun:
    """Amplification from two CSVs: per-prompt means, overall mean, excluded pairs.

    Writes ``amplification.csv`` (every pair), ``summary.csv`` (per prompt and average) and
    ``excluded.csv`` into ``out_dir`` (default ``./amplify_results``) and returns a
    :class:`StageRun` whose summary/messages the CLI prints. Values are percentage points.
    """
    training_csv, generated_csv = Path(training_csv), Path(generated_csv)
    training = read_table(training_csv, with_prompt=False)
    generated = read_table(generated_csv, with_prompt=True)
    pairs = amplify_pairs(training, generated, generated_path=generated_csv)
    per_prompt, overall = summarize(pairs, replicates=replicates, confidence=confidence, seed=seed)
    run = StageRun("amplify")
    run.rows_in = len(pairs)
    run.rows_out = sum(not p.excluded for p in pairs)
    for p in pairs:
        if p.excluded:
            run.drop(p.exclude_reason or "excluded")
    summary = [
        {
            "prompt": s.prompt,
            "included": s.n_included,
            "excluded": s.n_excluded,
            "mean_A": s.mean,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "t": s.t_stat,
            "p": s.p_value,
        }
        for s in per_prompt
    ]
    summary.append(
        {
            "prompt": f"average ({overall.n_prompts} prompts)",
            "included": sum(s.n_included for s in per_prompt),
            "excluded": sum(s.n_excluded for s in per_prompt),
            "mean_A": overall.mean,
            "ci_low": overall.ci_low,
            "ci_high": overall.ci_high,
            "t": None,
            "p": None,
        }
    )
    run.summary = summary
    m = metric("amplification")
    run.messages.append(f"{m.formula}; {m.unit}; {m.description}")
    if overall.ci_low is None and overall.mean is not None:
        run.messages.append(
            "no bootstrap intervals: give n (labelled images) in every row of both files"
        )
    for p in pairs:
        if p.excluded:
            run.messages.append(
                f"excluded: {p.occupation} / prompt {p.prompt}: T={_fmt(p.training.percent)}, "
                f"G={_fmt(p.generated.percent)} ({p.exclude_reason})"
            )
    unused = sorted({r.occupation for r in training} - {g.occupation for g in generated})
    if unused:
        run.messages.append(
            f"{len(unused)} training occupation(s) have no generated row: {', '.join(unused)}"
        )
    run.provenance = {
        "training_csv": str(training_csv),
        "generated_csv": str(generated_csv),
        "bootstrap": replicates,
        "confidence": confidence,
        "seed": seed,
    }
    run.outputs = write_outputs(Path(out_dir) if out_dir else DEFAULT_OUT, pairs, summary)
    return run


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def write_outputs(out_dir: Path, pairs: list[Pair], summary: list[dict]) -> dict[str, str]:
    """Write the three result CSVs; returns name -> path."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TableError(f"{out_dir}: cannot create the output directory ({exc})") from None
    pair_cols = [
        "occupation",
        "prompt",
        "training_pf",
        "training_n",
        "generated_pf",
        "generated_n",
        "amplification",
        "excluded",
        "exclude_reason",
    ]
    pair_rows = [
        {
            "occupation": p.occupation,
            "prompt": p.prompt,
            "training_pf": p.training.percent,
            "training_n": p.training.n,
            "generated_pf": p.generated.percent,
            "generated_n": p.generated.n,
            "amplification": p.amplification,
            "excluded": str(p.excluded).lower(),
            "exclude_reason": p.exclude_reason,
        }
        for p in pairs
    ]
    paths = {
        "amplification_csv": out_dir / "amplification.csv",
        "summary_csv": out_dir / "summary.csv",
        "excluded_csv": out_dir / "excluded.csv",
    }
    _write_csv(paths["amplification_csv"], pair_cols, pair_rows)
    _write_csv(paths["summary_csv"], list(summary[0]), summary)
    _write_csv(paths["excluded_csv"], pair_cols, [r for r in pair_rows if r["excluded"] == "true"])
    return {k: str(v) for k, v in paths.items()}


def _write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: _cell(row.get(c)) for c in columns})
    tmp.replace(path)
