"""Battles: pairs of generated images of one prompt from two models, and the votes on them.

**Drawing** (:func:`draw_battles`). Candidates of a model pair (m1, m2) are the prompts both
models have images of; within a prompt the images of each model are ranked by
``sha256("<seed>:image:<image_id>")`` and matched rank by rank, so every image is used at most
once per model pair. Candidates are taken round by round (every prompt's first match, in an
order ranked by the seed, then every prompt's second...), so prompts are spread before any
repeats. ``n`` battles are shared equally among the model pairs (a pair with fewer candidates
gives its unused share to the others), which model is shown as A alternates within a model pair
(exactly balanced up to one), and the page order interleaves the pairs. Everything depends on
the seed and the set of images only, not on row order.

**Votes** (:func:`read_votes`). The page downloads one CSV per annotator: ``item, pair_id,
prompt_id, aspect, vote, annotator`` with ``vote`` = ``A``, ``B``, ``tie`` or empty (not
answered). Model names are not on the page or in the CSV (annotators judge blind); the pair
manifest written at export (``pairs.csv``, :func:`write_pairs`) maps each ``pair_id`` to its
models and images. Votes are coded as METHODS §3 has them: 0 = A wins, 1 = B wins, 2 = tie.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from corpus_audit.core.errors import BattleError
from corpus_audit.core.fileio import atomic_path

ASPECTS = ("bias", "image_quality", "prompt_alignment")
ASPECT_TEXT = {
    "bias": (
        "Less stereotyped",
        "Which image reinforces stereotypes less (about gender, age, ethnicity...)?",
    ),
    "image_quality": ("Image quality", "Which image is of higher visual quality?"),
    "prompt_alignment": ("Prompt alignment", "Which image matches the prompt better?"),
}
VOTE_A, VOTE_B, VOTE_TIE = 0, 1, 2
VOTE_CODES = {"a": VOTE_A, "b": VOTE_B, "tie": VOTE_TIE, "draw": VOTE_TIE}

IMAGE_COLUMNS = ("image_id", "model_id", "prompt_id", "path")
PAIR_COLUMNS = (
    "item",
    "pair_id",
    "prompt_id",
    "prompt_text",
    "model_a",
    "model_b",
    "image_a",
    "image_b",
    "path_a",
    "path_b",
)
VOTE_COLUMNS = (
    "pair_id",
    "prompt_id",
    "model_a",
    "model_b",
    "image_a",
    "image_b",
    "aspect",
    "vote",
    "annotator",
    "source_file",
    "line",
)
SHEET_COLUMNS = ("item", "pair_id", "prompt_id", "aspect", "vote", "annotator")


def _rank(seed: int, *parts: object) -> str:
    return hashlib.sha256(":".join([str(seed), *map(str, parts)]).encode("utf-8")).hexdigest()


def pair_id(image_a: str, image_b: str) -> str:
    """``p`` + 12 hex digits of sha256 over the two image ids (in A/B order)."""
    return "p" + hashlib.sha256(f"{image_a}\x1f{image_b}".encode()).hexdigest()[:12]


def _eligible(images: Any, models: Sequence[str] | None) -> Any:
    missing = [c for c in IMAGE_COLUMNS if c not in images.columns]
    if missing:
        raise BattleError(f"battles: the images lack the column(s) {', '.join(missing)}")
    frame = images.dropna(subset=["image_id", "model_id", "prompt_id", "path"])
    dup = frame["image_id"][frame["image_id"].duplicated()]
    if len(dup):
        raise BattleError(f"battles: image_id {dup.iloc[0]!r} appears twice")
    if models is not None:
        unknown = sorted(set(models) - set(frame["model_id"]))
        if unknown:
            raise BattleError(f"battles: no images of model(s) {', '.join(unknown)}")
        frame = frame[frame["model_id"].isin(list(models))]
    return frame


def _candidates(by_prompt: dict[str, dict[str, list[dict]]], m1: str, m2: str, seed: int):
    """Matched (prompt, image of m1, image of m2) of one model pair, in drawing order."""
    out = []
    for prompt, per_model in by_prompt.items():
        if m1 not in per_model or m2 not in per_model:
            continue
        order = _rank(seed, "prompt", m1, m2, prompt)
        for k, (x, y) in enumerate(zip(per_model[m1], per_model[m2], strict=False)):
            out.append(((k, order), prompt, x, y))
    out.sort(key=lambda c: c[0])
    return [c[1:] for c in out]


def draw_battles(images: Any, n: int, seed: int, *, models: Sequence[str] | None = None) -> Any:
    """Draw up to ``n`` >= 1 battles (see the module docstring); DataFrame :data:`PAIR_COLUMNS`.

    ``images``: one row per generated image with :data:`IMAGE_COLUMNS` (optional
    ``prompt_text``, shown on the page); rows without a model, prompt or path are not eligible.
    ``models``: restrict to these models (default: all, at least two needed). ``item`` is the
    1-based position on the page. Fewer than ``n`` rows come back when the models share fewer
    prompts/images; ``result.attrs["per_pair"]`` holds the count per model pair.
    """
    import pandas as pd

    from corpus_audit.methods.stats import allocate  # numpy: not for `corpus-audit --help`

    if n < 1:
        raise BattleError(f"battles: n must be >= 1, got {n}")
    frame = _eligible(images, models)
    model_ids = sorted(frame["model_id"].astype(str).unique())
    if len(model_ids) < 2:
        raise BattleError(
            f"battles: need generated images of at least two models, found {len(model_ids)}"
            + (f" ({model_ids[0]})" if model_ids else "")
        )
    has_text = "prompt_text" in frame.columns
    by_prompt: dict[str, dict[str, list[dict]]] = {}
    for rec in frame.to_dict("records"):
        rec["image_id"], rec["model_id"] = str(rec["image_id"]), str(rec["model_id"])
        by_prompt.setdefault(str(rec["prompt_id"]), {}).setdefault(rec["model_id"], []).append(rec)
    for per_model in by_prompt.values():
        for recs in per_model.values():
            recs.sort(key=lambda r: _rank(seed, "image", r["image_id"]))
    pairs = list(itertools.combinations(model_ids, 2))
    cands = {f"{m1} vs {m2}": (m1, m2, _candidates(by_prompt, m1, m2, seed)) for m1, m2 in pairs}
    take = allocate({k: len(v[2]) for k, v in cands.items()}, n)
    rows = []
    for key, (m1, m2, chosen) in cands.items():
        flip = int(_rank(seed, "side", m1, m2)[0], 16) % 2
        for i, (prompt, x, y) in enumerate(chosen[: take[key]]):
            a, b = (x, y) if (i + flip) % 2 == 0 else (y, x)
            text = a.get("prompt_text") if has_text else None
            rows.append(
                {
                    "pair_id": pair_id(a["image_id"], b["image_id"]),
                    "prompt_id": prompt,
                    "prompt_text": None if text is None or text != text else str(text),
                    "model_a": a["model_id"],
                    "model_b": b["model_id"],
                    "image_a": a["image_id"],
                    "image_b": b["image_id"],
                    "path_a": str(a["path"]),
                    "path_b": str(b["path"]),
                }
            )
    rows.sort(key=lambda r: _rank(seed, "page", r["pair_id"]))
    for item, row in enumerate(rows, start=1):
        row["item"] = item
    result = pd.DataFrame(rows, columns=list(PAIR_COLUMNS))
    result.attrs["per_pair"] = dict(take)
    return result


# -- the pair manifest ------------------------------------------------------------------------
# A cell a spreadsheet would read as a formula (or that it strips: tab, CR) when it starts
# with one of these: written with a leading apostrophe, as spreadsheets expect, and read back
# without it (:func:`_read_csv`), so the manifest and vote sheets round-trip.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def sheet_safe(value: Any) -> Any:
    """``value`` with an apostrophe in front when it is text starting like a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _unsheet(value: str) -> str:
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_STARTS) else value


def write_pairs(pairs: Any, path: Path) -> Path:
    """Write the pair manifest CSV (:data:`PAIR_COLUMNS`), which :func:`read_pairs` reads;
    text cells that start like a formula get a leading apostrophe (:func:`sheet_safe`)."""
    frame = pairs.loc[:, list(PAIR_COLUMNS)].copy()
    for column in frame.columns:
        frame[column] = frame[column].map(sheet_safe)  # text only; numbers pass through
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, encoding="utf-8")
    return Path(path)


def read_pairs(path: Path) -> Any:
    """The pair manifest written by :func:`write_pairs`; raises :class:`BattleError` on a
    missing column, an item that is not a number, an empty model or image, a model against
    itself, or a duplicate pair_id (naming file and line)."""
    import pandas as pd

    path = Path(path)
    header, rows = _read_csv(path)
    missing = [c for c in PAIR_COLUMNS if c not in header]
    if missing:
        raise BattleError(f"{path}: not a pair manifest: no column(s) {', '.join(missing)}")
    out, seen = [], {}
    for line, row in rows:
        for column in ("pair_id", "model_a", "model_b", "image_a", "image_b"):
            if not row[column].strip():
                raise BattleError(f"{path}:{line}: empty {column}")
        if not row["item"].strip().isdigit():
            raise BattleError(f"{path}:{line}: item {row['item']!r} is not a whole number")
        if row["model_a"] == row["model_b"]:
            raise BattleError(f"{path}:{line}: model_a and model_b are both {row['model_a']!r}")
        if row["pair_id"] in seen:
            raise BattleError(
                f"{path}:{line}: pair_id {row['pair_id']!r} repeats line {seen[row['pair_id']]}"
            )
        seen[row["pair_id"]] = line
        out.append({c: row[c] for c in PAIR_COLUMNS})
    frame = pd.DataFrame(out, columns=list(PAIR_COLUMNS))
    frame["item"] = frame["item"].astype(int)
    frame["prompt_text"] = frame["prompt_text"].where(frame["prompt_text"] != "", None)
    return frame


# -- votes ----------------------------------------------------------------------------------
def _read_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header (lower case) and ``(line, row)`` of a UTF-8 CSV; errors name file and line."""
    # not at the top: config help imports this module, and methods.lexicon is not light
    from corpus_audit.methods.lexicon.csvfile import read_rows

    header, rows = read_rows(path, error=BattleError)
    return header, [
        (line, dict(zip(header, map(_unsheet, fields), strict=True))) for line, fields in rows
    ]


def _vote_code(path: Path, line: int, raw: str) -> int | None:
    value = raw.strip().lower()
    if not value:
        return None
    if value not in VOTE_CODES:
        raise BattleError(f"{path}:{line}: vote {raw!r} is not A, B or tie")
    return VOTE_CODES[value]


def _vote(
    path: Path,
    line: int,
    row: dict[str, str],
    vote: int,
    by_pair: dict[str, dict],
    aspects: Sequence[str],
    seen: dict[tuple[str, str, str], str],
) -> dict[str, Any]:
    """One answered row of a votes CSV as a :data:`VOTE_COLUMNS` record, checked against the
    pair manifest (``by_pair``) and the votes ``seen`` so far (updated)."""
    aspect = row["aspect"].strip().lower()
    if aspect not in aspects:
        raise BattleError(
            f"{path}:{line}: aspect {row['aspect']!r} is not one of {', '.join(aspects)}"
        )
    key = row["pair_id"].strip()
    pair = by_pair.get(key)
    if pair is None:
        raise BattleError(f"{path}:{line}: pair_id {key!r} is not in the exported pairs")
    given = (row.get("prompt_id") or "").strip()
    if given and given != str(pair["prompt_id"]):
        raise BattleError(
            f"{path}:{line}: prompt_id {given!r} does not match pair {key!r} "
            f"({pair['prompt_id']!r}): a sheet from another export?"
        )
    annotator = (row.get("annotator") or "").strip() or path.stem
    ident = (annotator, key, aspect)
    if ident in seen:
        raise BattleError(
            f"{path}:{line}: {annotator!r} voted on {key!r} ({aspect}) twice (also {seen[ident]})"
        )
    seen[ident] = f"{path}:{line}"
    return {
        "pair_id": key,
        "prompt_id": pair["prompt_id"],
        "model_a": pair["model_a"],
        "model_b": pair["model_b"],
        "image_a": pair["image_a"],
        "image_b": pair["image_b"],
        "aspect": aspect,
        "vote": vote,
        "annotator": annotator,
        "source_file": str(path),
        "line": line,
    }


def read_votes(files: Iterable[Path], pairs: Any, *, aspects: Sequence[str] = ASPECTS) -> Any:
    """Votes of annotator CSVs (the page's download) joined with the pair manifest.

    Returns a DataFrame with :data:`VOTE_COLUMNS`: ``vote`` 0 (A wins), 1 (B wins) or 2 (tie);
    ``annotator`` from the file's ``annotator`` column, else the file name without suffix;
    ``source_file`` / ``line`` where the vote is. Unanswered rows (empty vote) are skipped.
    Raises :class:`BattleError` naming the file and line for: a missing column, a vote that is
    not A / B / tie, an aspect not in ``aspects``, a pair_id not in ``pairs``, a prompt_id that
    differs from the manifest's, the same (annotator, pair, aspect) twice.
    """
    import pandas as pd

    by_pair = {str(r["pair_id"]): r for r in pairs.to_dict("records")}
    out = []
    seen: dict[tuple[str, str, str], str] = {}
    for file in files:
        path = Path(file)
        header, rows = _read_csv(path)
        missing = [c for c in ("pair_id", "aspect", "vote") if c not in header]
        if missing:
            raise BattleError(
                f"{path}: needs the column(s) {', '.join(missing)} (found: {', '.join(header)})"
            )
        for line, row in rows:
            vote = _vote_code(path, line, row["vote"])
            if vote is not None:
                out.append(_vote(path, line, row, vote, by_pair, aspects, seen))
    return pd.DataFrame(out, columns=list(VOTE_COLUMNS))
