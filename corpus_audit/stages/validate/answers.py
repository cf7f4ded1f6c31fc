"""The annotators' answers of ``validate import``: read (every fault named by file and line),
stored, Krippendorff's alpha and the classifier's agreement with the majority vote."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.core.errors import ValidationError
from corpus_audit.core.store import StageRun, Study
from corpus_audit.stages.validate.questions import agreement_rows, parse_answers

# what an annotator may write for each label (lower-cased, stripped)
LABEL_SPELLINGS = {
    "male": ("male", "m", "man"),
    "female": ("female", "f", "woman"),
    "unsure": ("unsure", "u", "?", "unknown", "ambiguous"),
}
LABELS = tuple(LABEL_SPELLINGS)  # ("male", "female", "unsure")
ALIASES = {spelling: label for label, words in LABEL_SPELLINGS.items() for spelling in words}


def read_annotations(study: Study, files: list[Path]) -> list[tuple]:
    """``[(image_id, annotator, label, file, monk, age_bin, quality, race, swatch_order)]``
    from annotator CSVs (``label`` '' where only the further questions were answered); raises
    :class:`ValidationError` naming the file and line of anything wrong."""
    known = {r[0] for r in study.con.execute("SELECT image_id FROM images").fetchall()}
    items = dict(study.con.execute("SELECT item, image_id FROM validation_items").fetchall())
    out: list[tuple] = []
    seen: dict[tuple[str, str], str] = {}
    for file in files:
        path = Path(file)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise ValidationError(f"{path}: no such annotation file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(f"{path}: cannot read as UTF-8 CSV: {exc}") from None
        reader = csv.DictReader(io.StringIO(text))
        fields = [f.strip().lower() for f in (reader.fieldnames or [])]
        reader.fieldnames = fields
        if "label" not in fields or not ({"image_id", "item"} & set(fields)):
            raise ValidationError(
                f"{path}: needs a 'label' column and an 'image_id' or 'item' column "
                f"(found: {', '.join(fields) or 'nothing'})"
            )
        for line, row in enumerate(reader, start=2):
            raw = (row.get("label") or "").strip().lower()
            answers = parse_answers(path, line, row)
            if not raw and all(answers[k] is None for k in ("monk", "age_bin", "quality", "race")):
                continue  # not annotated
            label = ALIASES.get(raw) if raw else ""
            if label is None:
                raise ValidationError(
                    f"{path}:{line}: label {row.get('label')!r} is not male, female or unsure"
                )
            image_id = (row.get("image_id") or "").strip()
            if not image_id:
                item = (row.get("item") or "").strip()
                if not item.isdigit() or int(item) not in items:
                    raise ValidationError(f"{path}:{line}: item {item!r} is not on the sheet")
                image_id = items[int(item)]
            if image_id not in known:
                raise ValidationError(f"{path}:{line}: unknown image_id {image_id!r}")
            annotator = (row.get("annotator") or "").strip() or path.stem
            key = (annotator, image_id)
            if key in seen:
                raise ValidationError(
                    f"{path}:{line}: {annotator!r} labelled {image_id!r} twice "
                    f"(also in {seen[key]})"
                )
            seen[key] = f"{path}:{line}"
            out.append(
                (image_id, annotator, label, str(path), answers["monk"], answers["age_bin"])
                + (answers["quality"], answers["race"], answers["swatch_order"])
            )
    return out


def reliability(votes: dict[str, dict[str, str]], *, drop_unsure: bool = False) -> float | None:
    """Krippendorff's alpha (nominal) of ``{image_id: {annotator: label}}``; None when it is
    undefined (fewer than two annotators, or no pairable values / no variation)."""
    import krippendorff

    annotators = sorted({a for v in votes.values() for a in v})
    images = sorted(votes)
    if len(annotators) < 2 or not images:
        return None
    code = {label: i for i, label in enumerate(LABELS)}
    data = np.full((len(annotators), len(images)), np.nan)
    for j, image_id in enumerate(images):
        for i, annotator in enumerate(annotators):
            label = votes[image_id].get(annotator)
            if label is not None and not (drop_unsure and label == "unsure"):
                data[i, j] = code[label]
    pairable = (np.sum(~np.isnan(data), axis=0) >= 2).sum()
    values = np.unique(data[~np.isnan(data)])
    if pairable == 0 or len(values) < 2:
        return None
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


def majority(labels: list[str]) -> str | None:
    """The most frequent label if it is strictly more frequent than any other, else None."""
    counts = Counter(labels).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def store(study: Study, rows: list[tuple], annotators: list[str]) -> None:
    """Replace the annotators' earlier answers with ``rows`` and the agreement table, in one
    transaction."""
    with study.transaction() as con:
        if annotators:
            con.execute(
                "DELETE FROM human_labels WHERE annotator IN (SELECT unnest(?))", [annotators]
            )
        if rows:
            con.executemany(
                "INSERT INTO human_labels (image_id, annotator, label, source_file, monk, "
                "age_bin, quality, race, swatch_order) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        _write_agreement(study, con)


def further_alphas(study: Study) -> list[dict[str, Any]]:
    """Summary rows: alpha of the further questions (pooled over sources)."""
    rows = study.con.execute(
        "SELECT attribute, alpha_kind, alpha, n_items FROM validation_agreement "
        "WHERE source = 'pooled' AND attribute <> 'gender' ORDER BY attribute"
    ).fetchall()
    return [
        {"metric": f"krippendorff_alpha {a} ({kind}, {n} images)", "value": alpha}
        for a, kind, alpha, n in rows
    ]


def _write_agreement(study: Study, con: Any) -> None:
    """Replace ``validation_agreement`` from every stored answer (inside the caller's
    transaction): alpha per attribute, pooled and per image source."""
    rows = con.execute(
        "SELECT image_id, annotator, label, monk, age_bin, race FROM human_labels"
    ).fetchall()
    sources = dict(
        con.execute(
            "SELECT image_id, CASE WHEN source = 'generated' THEN coalesce(model_id, 'unknown') "
            "ELSE source END FROM images"
        ).fetchall()
    )
    con.execute("DELETE FROM validation_agreement")
    for r in agreement_rows(rows, sources):
        con.execute(
            "INSERT INTO validation_agreement VALUES (?, ?, ?, ?, ?, ?)",
            [
                r["attribute"],
                r["source"],
                r["n_items"],
                r["n_annotators"],
                r["alpha"],
                r["alpha_kind"],
            ],
        )


def compare(
    votes: dict[str, dict[str, str]], classifier: dict[str, str]
) -> tuple[int, int, int, int, int]:
    """The classifier against the annotators' majority vote: (images compared, of which
    agreeing, classifier ambiguous, no majority (a tie), majority unsure). Compared are the
    images with a male/female majority and a male/female classifier label."""
    compared = agree = clf_ambiguous = no_majority = majority_unsure = 0
    for image_id, by_annotator in votes.items():
        vote = majority(list(by_annotator.values()))
        if vote is None:
            no_majority += 1
            continue
        if vote == "unsure":
            majority_unsure += 1
            continue
        predicted = classifier.get(image_id)
        if predicted is None:
            continue
        if predicted == "ambiguous":
            clf_ambiguous += 1
            continue
        compared += 1
        agree += predicted == vote
    return compared, agree, clf_ambiguous, no_majority, majority_unsure


def summary_dict(run: StageRun) -> dict[str, Any]:
    """``run.summary`` of :func:`import_labels` as ``{metric: value}``."""
    return {row["metric"]: row["value"] for row in run.summary}
