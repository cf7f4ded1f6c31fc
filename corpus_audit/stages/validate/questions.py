"""The validation sheet's questions beyond perceived gender, and their agreement.

Per image the sheet of ``validate export`` asks, besides perceived gender: the **Monk Skin
Tone** (1-10, the ten published swatches as buttons, their order shuffled on each annotator's
page load and recorded with the answers, or "can't tell"), the **perceived age bin** (the BLS
aligned bins, or "can't tell"), an **image-quality** flag (ok / poor) and, only when the study
asks for it (``validate export --race``), **perceived race or ethnicity** (human answers only;
no model ever estimates it). ``validate import`` reads them (empty or "can't tell" is no answer)
and stores Krippendorff's alpha per attribute and image source in ``validation_agreement``:
ordinal for the Monk tone and the age bin, nominal for gender and race.
"""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.core.errors import ValidationError
from corpus_audit.methods.age_bins import AGE_BINS

#: the Monk Skin Tone scale's ten swatches (Google, 2022), tone 1 (lightest) to 10
MONK_HEX = ("#f6ede4", "#f3e7db", "#f7ead0", "#eadaba", "#d7bd96",
            "#a07e56", "#825c43", "#604134", "#3a312a", "#292420")  # fmt: skip
QUALITY = ("ok", "poor")
RACE = ("white", "black", "asian", "hispanic_or_latino", "other")  # + can't tell
CANT_TELL = {"", "cant_tell", "can't tell", "cant tell", "?", "unsure", "unknown", "n/a", "na"}
QUESTION_COLUMNS = ("monk", "age_bin", "quality", "swatch_order")
ORDINAL = {"skin_tone": "monk", "age_bin": "age_bin"}
NOMINAL = {"race": "race"}

SWATCH_SCRIPT = """
  // Monk swatches in a random order on each page load (order effects): recorded per answer
  var order = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
  for (var k = order.length - 1; k > 0; k--) {
    var j = Math.floor(Math.random() * (k + 1)), t = order[k]; order[k] = order[j]; order[j] = t;
  }
  var boxes = document.querySelectorAll(".swatches");
  for (var b = 0; b < boxes.length; b++) {
    var labels = {};
    var all = boxes[b].querySelectorAll("label[data-tone]");
    for (var s = 0; s < all.length; s++) { labels[all[s].dataset.tone] = all[s]; }
    for (var o = 0; o < order.length; o++) { boxes[b].appendChild(labels[order[o]]); }
    boxes[b].appendChild(boxes[b].querySelector("label.cant"));
  }
  window.swatchOrder = order.join("-");
"""


def questions_html(item: int, race: bool) -> str:
    """The further questions of one sheet item (radio groups named by item)."""
    swatches = "".join(
        f'<label data-tone="{tone}" title="Monk {tone}"><input type="radio" name="m{item}" '
        f'value="{tone}"><span style="display:inline-block;width:1.3em;height:1.3em;'
        f'background:{hexa};border:1px solid #888;vertical-align:middle"></span></label>'
        for tone, hexa in enumerate(MONK_HEX, start=1)
    )
    swatches += f'<label class="cant"><input type="radio" name="m{item}" value="cant_tell"> can\'t tell</label>'
    ages = (
        "".join(
            f'<label><input type="radio" name="a{item}" value="{b}"> {b.replace("_", "-")}</label>'
            for b in AGE_BINS
        )
        + f'<label><input type="radio" name="a{item}" value="cant_tell"> can\'t tell</label>'
    )
    quality = "".join(
        f'<label><input type="radio" name="q{item}" value="{q}"> {q}</label>' for q in QUALITY
    )
    out = (
        f'<div class="q">skin tone: <span class="swatches">{swatches}</span></div>'
        f'<div class="q">age: {ages}</div><div class="q">image: {quality}</div>'
    )
    if race:
        choices = "".join(
            f'<label><input type="radio" name="r{item}" value="{r}"> '
            f"{html.escape(r.replace('_', ' '))}</label>"
            for r in (*RACE, "cant_tell")
        )
        out += f'<div class="q">perceived race or ethnicity: {choices}</div>'
    return out


def _choice(path: Path, line: int, column: str, raw: str | None, allowed: tuple) -> str | None:
    value = (raw or "").strip().lower().replace("-", "_").replace(" ", "_")
    if value.replace("_", " ") in CANT_TELL or value in CANT_TELL:
        return None
    if value not in allowed:
        raise ValidationError(
            f"{path}:{line}: {column} {raw!r} is not one of {', '.join(allowed)} or can't tell"
        )
    return value


def parse_answers(path: Path, line: int, row: dict[str, Any]) -> dict[str, Any]:
    """The further answers of one CSV row (None where not answered), checked."""
    raw = (row.get("monk") or "").strip().lower()
    monk = None
    if raw not in CANT_TELL:
        if not raw.isdigit() or not 1 <= int(raw) <= 10:
            raise ValidationError(
                f"{path}:{line}: monk {row.get('monk')!r} is not 1-10 or can't tell"
            )
        monk = int(raw)
    age = (row.get("age_bin") or "").strip().lower().replace("-", "_").replace("+", "_plus")
    return {
        "monk": monk,
        "age_bin": _choice(path, line, "age_bin", age, AGE_BINS),
        "quality": _choice(path, line, "quality", row.get("quality"), QUALITY),
        "race": _choice(path, line, "race", row.get("race"), RACE),
        "swatch_order": (row.get("swatch_order") or "").strip()[:40] or None,
    }


def _alpha(votes: dict[str, dict[str, float]], level: str) -> tuple[float | None, int, int]:
    """Krippendorff's alpha of ``{image: {annotator: value}}``; (alpha, items, annotators)."""
    import krippendorff  # a small optional library, imported only when alpha is computed

    annotators = sorted({a for v in votes.values() for a in v})
    items = [i for i in sorted(votes) if len(votes[i]) >= 2]
    if len(annotators) < 2 or not items:
        return None, len(items), len(annotators)
    data = np.full((len(annotators), len(items)), np.nan)
    for j, item in enumerate(items):
        for i, a in enumerate(annotators):
            if a in votes[item]:
                data[i, j] = votes[item][a]
    if len(np.unique(data[~np.isnan(data)])) < 2:
        return None, len(items), len(annotators)
    value = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    return float(value), len(items), len(annotators)


def agreement_rows(rows: list[tuple], sources: dict[str, str]) -> list[dict[str, Any]]:
    """``validation_agreement`` rows from ``(image_id, annotator, label, monk, age_bin, race)``
    tuples, per attribute, pooled and per image source (``sources``: image -> source)."""
    codes = {"gender": {"female": 0.0, "male": 1.0}, "age_bin": {b: float(i) for i, b in enumerate(AGE_BINS)},
             "race": {r: float(i) for i, r in enumerate(RACE)}}  # fmt: skip
    out = []
    for attribute, index, level in (("gender", 2, "nominal"), ("skin_tone", 3, "ordinal"),
                                    ("age_bin", 4, "ordinal"), ("race", 5, "nominal")):  # fmt: skip
        by_source: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        for r in rows:
            value = r[index]
            if value is None or value == "":
                continue
            code = float(value) if attribute == "skin_tone" else codes[attribute].get(value)
            if code is None:
                continue
            for source in ("pooled", sources.get(r[0], "unknown")):
                by_source[source][r[0]][r[1]] = code
        for source, votes in sorted(by_source.items()):
            alpha, n_items, n_annotators = _alpha(votes, level)
            out.append({"attribute": attribute, "source": source, "n_items": n_items,
                        "n_annotators": n_annotators, "alpha": alpha, "alpha_kind": level})  # fmt: skip
    return out
