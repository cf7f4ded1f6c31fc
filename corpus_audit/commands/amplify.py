"""``corpus-audit amplify``: amplification from plain %female tables, no study needed.

Two input shapes (UTF-8, header row, header names case-insensitive, comma- or tab-separated:
a header line holding a tab makes the file tab-separated):

- **long**, two files: training ``occupation,percent_female[,n]`` (one row per occupation)
  and generated ``occupation,prompt,percent_female[,n]`` (one row per (occupation, prompt));
  extra columns are ignored;
- **wide**, one file per model (``--table [NAME=]FILE``, repeatable): ``occupation``,
  ``training``, then one column per prompt (its name is the prompt's, e.g. ``prompt1``), and
  optionally ``training_n`` / ``<prompt>_n`` counts. The paper's published per-occupation
  tables (``percent_female_sd14.tsv``) have this shape.

``percent_female`` is in [0, 100]; an empty cell means "no labelled image" (the pair is
then excluded, as is a row with ``n = 0``). ``n`` is the number of labelled images behind
the percentage (``training_n`` gives one for every training value of a table without counts,
e.g. 500 for the paper's, whose training values are over exactly 500 labelled images). With
``n`` on both sides the means get bootstrap intervals (images resampled within each
occupation); a training ``n`` alone gives Wilson intervals of T in the HTML page. Occupation
names are compared lower-cased with spaces and underscores collapsed. Any problem raises
:class:`~corpus_audit.core.errors.CorpusAuditError` naming the file and line.

Exclusions follow ``parity_side`` (``upper``, the paper's rule, by default; see
:mod:`corpus_audit.methods.amplification`). Outputs: ``amplification.csv``, ``summary.csv``,
``excluded.csv`` and, with ``report=True`` (``--report``), ``amplification.html``: a
self-contained page with the per-prompt table, a T-vs-G scatter per prompt with the
amplification and de-amplification regions, the excluded pairs and the per-occupation values.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.core.config import MAX_RESAMPLES
from corpus_audit.core.errors import TableError
from corpus_audit.core.fileio import atomic_path
from corpus_audit.core.metrics import metric
from corpus_audit.core.store import StageRun
from corpus_audit.methods.amplification import (
    PAPER_PARITY_SIDE,
    ModelResult,
    Pair,
    Rate,
    TableRow,
    make_pair,
    summarize,
)
from corpus_audit.report.amplify_page import PageText, write_page

DEFAULT_OUT = Path("amplify_results")


@dataclass(frozen=True)
class AmplifyOptions:
    """How the amplification is computed (checked by :func:`check_options`): ``replicates``,
    the bootstrap resamples, an int in [1, MAX_RESAMPLES]; ``confidence`` of the intervals, in
    (0, 1); ``seed`` of the resampling, an int >= 0; ``parity_side``, where exactly 50 lies for
    the direction-switch exclusion: upper (the paper's rule) | neither."""

    replicates: int = 1000
    confidence: float = 0.95
    seed: int = 0
    parity_side: str = PAPER_PARITY_SIDE


def _norm(name: str) -> str:
    return " ".join(name.strip().lower().replace("_", " ").split())


def _header_name(name: str) -> str:
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


def _read_rows(path: Path, usage: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(line number, cells)]) of a UTF-8 CSV/TSV; blank lines skipped."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise TableError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TableError(f"{path}: is a directory, not a CSV file") from None
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = text.splitlines()
    delimiter = "\t" if lines and "\t" in lines[0] else ","
    reader = csv.reader(lines, delimiter=delimiter)
    header = next(reader, None)
    if header is None:
        raise TableError(f"{path}: empty file (needs a header: {usage})")
    rows = []
    for line, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue  # blank line
        if len(cells) < len(header):
            raise TableError(f"{path}:{line}: {len(cells)} fields, the header has {len(header)}")
        rows.append((line, cells))
    return header, rows


def _occupation(path: Path, line: int, raw: str) -> str:
    occupation = _norm(raw)
    if not occupation:
        raise TableError(f"{path}:{line}: empty occupation")
    return occupation


def _percent(path: Path, line: int, column: str, raw: str) -> float | None:
    pf = _number(path, line, column, raw)
    if pf is not None and not 0.0 <= pf <= 100.0:
        raise TableError(f"{path}:{line}: {column} {pf:g} is not in [0, 100]")
    return pf


def _count(path: Path, line: int, column: str, raw: str) -> int | None:
    value = _number(path, line, column, raw)
    if value is None:
        return None
    if value < 0 or not float(value).is_integer():
        raise TableError(f"{path}:{line}: {column} {raw.strip()!r} is not a whole number >= 0")
    return int(value)


def read_table(path: Path, *, with_prompt: bool) -> list[TableRow]:
    """Parse and validate one long-shape CSV (see the module docstring for the format)."""
    path = Path(path)
    required = (
        ["occupation", "prompt", "percent_female"]
        if with_prompt
        else ["occupation", "percent_female"]
    )
    header, lines = _read_rows(path, f"{','.join(required)}[,n]")
    columns = [_header_name(h) for h in header]
    missing = [c for c in required if c not in columns]
    if missing:
        raise TableError(
            f"{path}: missing column(s) {', '.join(repr(m) for m in missing)} "
            f"(header: {', '.join(header)}; needs {','.join(required)}[,n])"
        )
    index = {c: columns.index(c) for c in [*required, "n"] if c in columns}
    rows: list[TableRow] = []
    seen: dict[tuple[str, str | None], int] = {}
    for line, cells in lines:
        occupation = _occupation(path, line, cells[index["occupation"]])
        prompt = cells[index["prompt"]].strip() if with_prompt else None
        if with_prompt and not prompt:
            raise TableError(f"{path}:{line}: empty prompt")
        pf = _percent(path, line, "percent_female", cells[index["percent_female"]])
        n = _count(path, line, "n", cells[index["n"]]) if "n" in index else None
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


def read_wide_table(
    path: Path, *, training_n: int | None = None
) -> tuple[list[TableRow], list[TableRow]]:
    """Parse one wide table: ``occupation, training, <prompt>...[, training_n, <prompt>_n]``.

    Returns (training rows, generated rows); prompts keep the header's order and names.
    ``training_n`` is the count of every training value without its own ``training_n``.
    """
    path = Path(path)
    usage = "occupation,training,<prompt 1>,<prompt 2>,...[,training_n,<prompt>_n]"
    header, lines = _read_rows(path, usage)
    columns = [_header_name(h) for h in header]
    missing = [c for c in ("occupation", "training") if c not in columns]
    if missing:
        raise TableError(
            f"{path}: missing column(s) {', '.join(repr(m) for m in missing)} "
            f"(header: {', '.join(header)}; needs {usage})"
        )
    dupes = sorted({c for c in columns if columns.count(c) > 1})
    if dupes:
        raise TableError(f"{path}: duplicate column(s) {', '.join(repr(d) for d in dupes)}")
    counts = {c for c in columns if c.endswith("_n")}
    prompts = [c for c in columns if c not in ("occupation", "training") and c not in counts]
    if not prompts:
        raise TableError(f"{path}: no prompt columns (needs {usage})")
    col = {c: i for i, c in enumerate(columns)}
    training: list[TableRow] = []
    generated: list[TableRow] = []
    seen: dict[str, int] = {}
    for line, cells in lines:
        occupation = _occupation(path, line, cells[col["occupation"]])
        if occupation in seen:
            raise TableError(
                f"{path}:{line}: duplicate occupation '{occupation}' (first on line {seen[occupation]})"
            )
        seen[occupation] = line
        for name, out, prompt in [("training", training, None)] + [
            (p, generated, header[col[p]].strip()) for p in prompts
        ]:
            pf = _percent(path, line, header[col[name]].strip(), cells[col[name]])
            n_col = f"{name}_n"
            n = _count(path, line, n_col, cells[col[n_col]]) if n_col in col else None
            if n is None and name == "training" and pf is not None:
                n = training_n
            if n == 0:
                pf = None
            out.append(TableRow(occupation, prompt, pf, n, line))
    if not training:
        raise TableError(f"{path}: no data rows")
    return training, generated


def amplify_pairs(
    training: list[TableRow],
    generated: list[TableRow],
    *,
    generated_path: Path,
    parity_side: str = PAPER_PARITY_SIDE,
    model: str = "",
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
                Rate(("training", model, t.occupation), t.percent_female, t.n),
                Rate(("generated", model, g.occupation, g.prompt), g.percent_female, g.n),
                parity_side,
            )
        )
    return pairs


def amplify_tables(
    training_csv: Path,
    generated_csv: Path,
    out_dir: Path | None = None,
    *,
    options: AmplifyOptions = AmplifyOptions(),
    report: bool = False,
) -> StageRun:
    """Amplification from two long-shape CSVs: per-prompt means, overall mean, excluded pairs.

    Writes ``amplification.csv`` (every pair), ``summary.csv`` (per prompt and average),
    ``excluded.csv`` (and ``amplification.html`` with ``report``) into ``out_dir`` (default
    ``./amplify_results``) and returns a :class:`StageRun` whose summary/messages the CLI
    prints. Values are percentage points.
    """
    check_options(options)
    training_csv, generated_csv = Path(training_csv), Path(generated_csv)
    training = read_table(training_csv, with_prompt=False)
    generated = read_table(generated_csv, with_prompt=True)
    inputs = [(generated_csv.stem, f"{training_csv}, {generated_csv}", training, generated)]
    run = _amplify(
        inputs,
        out_dir,
        generated_paths=[generated_csv],
        options=options,
        page=PageText() if report else None,
    )
    run.provenance.update({"training_csv": str(training_csv), "generated_csv": str(generated_csv)})
    return run


def amplify_wide(
    tables: list[tuple[str, Path]],
    out_dir: Path | None = None,
    *,
    training_n: int | None = None,
    options: AmplifyOptions = AmplifyOptions(),
    report: bool = False,
    title: str | None = None,
    note: str | None = None,
    reference: dict[str, dict[str, float]] | None = None,
) -> StageRun:
    """Amplification from wide tables, one per model: ``[(model name, path), ...]``.

    ``reference`` (``{model: {prompt or "average": mean A}}``) adds published means beside the
    recomputed ones in the page; ``title`` and ``note`` head it (the demo labels the paper's
    numbers as published, not measured). Outputs as :func:`amplify_tables`, with a ``model``
    column telling the tables apart.
    """
    check_options(options, training_n=training_n)
    if not tables:
        raise TableError("amplify: no table given")
    names = [name for name, _ in tables]
    if len(set(names)) != len(names):
        raise TableError(f"amplify: two tables are named alike ({', '.join(names)})")
    inputs = []
    for name, path in tables:
        training, generated = read_wide_table(Path(path), training_n=training_n)
        inputs.append((name, str(path), training, generated))
    run = _amplify(
        inputs,
        out_dir,
        generated_paths=[Path(p) for _, p in tables],
        options=options,
        page=PageText(title, note, reference) if report else None,
    )
    run.provenance.update({"tables": {n: str(p) for n, p in tables}, "training_n": training_n})
    return run


def check_options(options: AmplifyOptions, training_n: Any = None) -> None:
    """The options of :func:`amplify_tables` / :func:`amplify_wide`, checked before any table
    is read: ``replicates`` an int in [1, MAX_RESAMPLES] (memory and time grow with it),
    ``confidence`` in (0, 1), ``seed`` an int >= 0, ``training_n`` None or an int >= 1 (the
    labelled images behind a training value), ``parity_side`` upper | neither. A
    :class:`TableError` names the option and the value."""
    replicates, confidence, seed = options.replicates, options.confidence, options.seed

    def whole(name: str, value: Any, low: int, high: int | None = None) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TableError(f"amplify: {name} must be a whole number, not {value!r}"[:200])
        if value < low or (high is not None and value > high):
            span = f"in [{low:,}, {high:,}]" if high is not None else f">= {low}"
            raise TableError(f"amplify: {name} {value} is not {span}")

    whole("replicates", replicates, 1, MAX_RESAMPLES)
    whole("seed", seed, 0)
    if training_n is not None:
        whole("training_n (--training-n)", training_n, 1)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)):
        raise TableError(f"amplify: confidence must be a number in (0, 1), not {confidence!r}")
    if not 0 < float(confidence) < 1:
        raise TableError(f"amplify: confidence {confidence} is not in (0, 1)")
    if options.parity_side not in ("upper", "neither"):
        raise TableError(
            f"amplify: parity_side {options.parity_side!r} is not upper or neither"[:200]
        )


def _amplify(
    inputs: list[tuple[str, str, list[TableRow], list[TableRow]]],
    out_dir: Path | None,
    *,
    generated_paths: list[Path],
    options: AmplifyOptions,
    page: PageText | None,
) -> StageRun:
    """The arithmetic and outputs shared by the long and wide inputs; ``page``: what heads
    ``amplification.html`` (None: no page)."""
    parity_side = options.parity_side
    results: list[ModelResult] = []
    for (model, source, training, generated), gpath in zip(inputs, generated_paths, strict=True):
        pairs = amplify_pairs(
            training, generated, generated_path=gpath, parity_side=parity_side, model=model
        )
        per_prompt, overall = summarize(
            pairs, replicates=options.replicates, confidence=options.confidence, seed=options.seed
        )
        unused = sorted({r.occupation for r in training} - {g.occupation for g in generated})
        results.append(ModelResult(model, source, training, pairs, per_prompt, overall, unused))
    several = len(results) > 1
    run = StageRun("amplify")
    all_pairs = [p for r in results for p in r.pairs]
    run.rows_in = len(all_pairs)
    run.rows_out = sum(not p.excluded for p in all_pairs)
    for p in all_pairs:
        if p.excluded:
            run.drop(p.exclude_reason or "excluded")
    summary = [row for r in results for row in summary_rows(r, with_model=several)]
    run.summary = summary
    run.messages += _amplify_messages(results, parity_side, several)
    run.provenance = {
        "bootstrap": options.replicates,
        "confidence": options.confidence,
        "seed": options.seed,
        "parity_side": parity_side,
    }
    out = Path(out_dir) if out_dir else DEFAULT_OUT
    run.outputs = write_outputs(out, results, summary)
    if page is not None:
        run.outputs["report"] = str(
            write_page(
                out / "amplification.html",
                results,
                parity_side=parity_side,
                confidence=options.confidence,
                text=page,
            )
        )
    return run


def _amplify_messages(results: list[ModelResult], parity_side: str, several: bool) -> list[str]:
    """The notes printed with an ``amplify`` run: the metric, the direction rule, missing
    intervals, excluded pairs and training occupations without a generated row."""
    messages = []
    m = metric("amplification")
    messages.append(f"{m.formula}; {m.unit}; {m.description}")
    messages.append(f"direction switch: {_rule_text(parity_side)}")
    if any(r.overall.ci_low is None and r.overall.mean is not None for r in results):
        messages.append(
            "no bootstrap intervals: they need n (labelled images) behind every T and G"
        )
    messages += excluded_messages(results)
    for r in results:
        if r.unused:
            messages.append(
                f"{(r.model + ': ') if several else ''}{len(r.unused)} training occupation(s) "
                f"have no generated row: {', '.join(r.unused)}"
            )
    return messages


def _rule_text(parity_side: str) -> str:
    if parity_side == "upper":
        return "excluded when (T < 50) != (G < 50): exactly 50 counts with the upper side (the paper's rule)"
    return "excluded when (T - 50)(G - 50) < 0: exactly 50 is on no side (strict rule)"


def summary_rows(result: ModelResult, *, with_model: bool) -> list[dict]:
    """The printed/CSV summary of one model: one row per prompt and the average."""
    lead = {"model": result.model} if with_model else {}
    rows = [
        {
            **lead,
            "prompt": s.prompt,
            "included": s.n_included,
            "excluded": s.n_excluded,
            "mean_A": s.mean,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "t": s.t_stat,
            "p": s.p_value,
        }
        for s in result.per_prompt
    ]
    o = result.overall
    rows.append(
        {
            **lead,
            "prompt": f"average ({o.n_prompts} prompts)",
            "included": sum(s.n_included for s in result.per_prompt),
            "excluded": sum(s.n_excluded for s in result.per_prompt),
            "mean_A": o.mean,
            "ci_low": o.ci_low,
            "ci_high": o.ci_high,
            "t": None,
            "p": None,
        }
    )
    return rows


MAX_PAIR_LINES = 20  # more excluded pairs than this are printed grouped by occupation


def excluded_messages(results: list[ModelResult]) -> list[str]:
    """The excluded pairs: one line each when few, else one line per model grouped by
    occupation; plus the occupations excluded for every prompt (of every model)."""
    several = len(results) > 1
    excluded = [(r, p) for r in results for p in r.pairs if p.excluded]
    out: list[str] = []
    if len(excluded) <= MAX_PAIR_LINES:
        for r, p in excluded:
            out.append(
                f"excluded: {(r.model + ' / ') if several else ''}{p.occupation} / prompt "
                f"{p.prompt}: T={_fmt(p.training.percent)}, G={_fmt(p.generated.percent)} "
                f"({p.exclude_reason})"
            )
    else:
        for r in results:
            groups: dict[str, list[str]] = {}
            for p in r.pairs:
                if p.excluded:
                    groups.setdefault(p.occupation, []).append(str(p.prompt))
            parts = [f"{occ} ({', '.join(prompts)})" for occ, prompts in groups.items()]
            out.append(
                f"excluded pairs{(' of ' + r.model) if several else ''} "
                f"({sum(len(v) for v in groups.values())}): " + "; ".join(parts)
            )
    every: list[set[str]] = []
    for r in results:
        prompts = {p.prompt for p in r.pairs}
        if len(prompts) < 2:
            continue
        per_occ: dict[str, set] = {}
        for p in r.pairs:
            if p.excluded:
                per_occ.setdefault(p.occupation, set()).add(p.prompt)
        every.append({occ for occ, got in per_occ.items() if got == prompts})
    if every:
        common = sorted(set.intersection(*every))
        scope = "every prompt of every table" if several else "every prompt"
        out.append(f"excluded for {scope}: {', '.join(common) if common else 'none'}")
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def write_outputs(out_dir: Path, results: list[ModelResult], summary: list[dict]) -> dict[str, str]:
    """Write the three result CSVs (a ``model`` column first); returns name -> path."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TableError(f"{out_dir}: cannot create the output directory ({exc})") from None
    pair_cols = [
        "model",
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
            "model": r.model,
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
        for r in results
        for p in r.pairs
    ]
    summary_out = [
        {"model": results[0].model, **row} if "model" not in row else row for row in summary
    ]
    paths = {
        "amplification_csv": out_dir / "amplification.csv",
        "summary_csv": out_dir / "summary.csv",
        "excluded_csv": out_dir / "excluded.csv",
    }
    _write_csv(paths["amplification_csv"], pair_cols, pair_rows)
    _write_csv(paths["summary_csv"], list(summary_out[0]), summary_out)
    _write_csv(paths["excluded_csv"], pair_cols, [r for r in pair_rows if r["excluded"] == "true"])
    return {k: str(v) for k, v in paths.items()}


def _write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: _cell(row.get(c)) for c in columns})
