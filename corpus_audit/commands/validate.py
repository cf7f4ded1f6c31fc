"""Human validation of the perceived-gender labels (METHODS 1.4, last paragraph).

``corpus-audit validate export DIR --n 200`` (:func:`export_sheet`) draws a stratified sample of
labelled images, strata = (image source, classifier label), equal shares per stratum (a small
stratum gives its unused share to the others), reproducible from ``study.seed``. It writes

- ``sheet.html``: one self-contained page (images inlined as base64 JPEG thumbnails, no
  external resources, every text escaped) where an annotator clicks male / female / unsure
  per image and downloads a filled CSV (the page builds it in the browser, offline);
- ``sheet.csv``: the same items as a CSV template (``item, image_id, label``) to fill by hand.

The classifier's labels are not shown (annotators label blind). The sample is stored in
``validation_items``.

``corpus-audit validate import DIR FILE...`` (:func:`import_labels`) reads one CSV per
annotator (columns ``image_id`` or ``item``, and ``label``: male / female / unsure, also
m / f / u; empty = not annotated; an ``annotator`` column, else the file name), replaces
earlier labels of the same annotators in ``human_labels`` and reports Krippendorff's alpha
(nominal; ``krippendorff`` package) among all annotators, with and without ``unsure``, and
the classifier's agreement with the per-image majority vote (the paper: alpha 0.948, 98 %).
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.backends.classifiers import classifier_id
from corpus_audit.commands.validate_questions import (
    SWATCH_SCRIPT,
    agreement_rows,
    parse_answers,
    questions_html,
)
from corpus_audit.core.errors import CorpusAuditError, StageOrderError, ValidationError
from corpus_audit.core.imagefile import study_image_path
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.stats import allocate
from corpus_audit.report.thumbs import thumbnail_uri
from corpus_audit.stages.analyze.strata import prepare_strata

THUMBNAIL_PX = 320  # longest side of the inlined images
RACE_NOTE = (
    "<p><b>Perceived race or ethnicity</b> is asked because this study opted in: answer only "
    "what the image shows to you, or can't tell. No model estimates it; the answers are "
    "reported as aggregates only.</p>"
)
LABELS = ("male", "female", "unsure")
ALIASES = {
    "male": "male",
    "m": "male",
    "man": "male",
    "female": "female",
    "f": "female",
    "woman": "female",
    "unsure": "unsure",
    "u": "unsure",
    "?": "unsure",
    "unknown": "unsure",
    "ambiguous": "unsure",
}


# -- export ---------------------------------------------------------------------------------------
def _classifier_for(study: Study) -> str:

    cid = classifier_id(study.config.label)
    if study.count("labels", "classifier = ?", [cid]):
        return cid
    others = [r[0] for r in study.con.execute("SELECT DISTINCT classifier FROM labels").fetchall()]
    if len(others) == 1:
        return others[0]
    if not others:
        raise StageOrderError("validate: no labelled images yet; run `corpus-audit label DIR`")
    raise StageOrderError(
        f"validate: no labels of {cid} (label.classifier); the study has labels of "
        f"{', '.join(sorted(others))}: set label.classifier accordingly"
    )


def draw_sample(
    study: Study, cid: str, n: int, by_attributes: bool = False
) -> list[tuple[str, str, str]]:
    """``[(image_id, path, stratum)]``: the stratified sample, in a stable shuffled order.

    Within a stratum images are ranked by ``sha256(seed:image_id)``, so the sample depends
    only on the study seed and the labels (not on DuckDB's hash or row order).
    ``by_attributes``: strata also split by perceived tone and age group (equal quotas per
    group, :mod:`corpus_audit.stages.analyze.strata`)."""
    seed = study.config.study.seed

    def rank(image_id: str) -> str:
        return hashlib.sha256(f"{seed}:{image_id}".encode()).hexdigest()

    prepare_strata(study)
    rows = study.sql("validate/strata", classifier=cid, by_attributes=by_attributes).fetchall()
    by_stratum: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for image_id, path, stratum in sorted(rows, key=lambda r: (r[2], rank(r[0]))):
        by_stratum[stratum].append((image_id, path, stratum))
    take = allocate({s: len(v) for s, v in by_stratum.items()}, n)
    chosen = [item for s, items in sorted(by_stratum.items()) for item in items[: take[s]]]
    # interleave the strata on the sheet (a different ranking than the one that chose them)
    return sorted(chosen, key=lambda item: rank("sheet:" + item[0]))


def _thumbnail(path: Path, max_pixels: int) -> str | None:
    """A JPEG data URI of the image (longest side THUMBNAIL_PX), or None when unreadable."""
    return thumbnail_uri(path, size=THUMBNAIL_PX, max_pixels=max_pixels, quality=85)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; max-width: 70em; }}
.items {{ display: flex; flex-wrap: wrap; gap: 1em; }}
figure {{ border: 1px solid #ccc; padding: .5em; margin: 0; width: {px}px; }}
figure img {{ max-width: {px}px; max-height: {px}px; display: block; margin: auto; }}
figcaption {{ font-size: .85em; margin-top: .4em; }}
label {{ margin-right: .6em; white-space: nowrap; }}
.q {{ font-size: .85em; margin-top: .3em; }}
.missing {{ height: 8em; background: #eee; text-align: center; line-height: 8em; }}
#bar {{ position: sticky; top: 0; background: #fff; padding: .5em 0; border-bottom: 1px solid #ccc; }}
</style></head><body>
<h1>{title}</h1>
<p>For each image, choose the gender the person is <em>perceived</em> to have, or
<b>unsure</b> when you cannot tell. Binary perceived gender is a limited construct: label what
the image shows, not what you assume about the person. Then, where you can: the closest of the
ten Monk skin-tone swatches (look at the whole face under its light, ignore make-up; their order
is shuffled for each annotator), the perceived age, and whether the image is too poor to judge.
Answer "can't tell" rather than guess. {n} images.</p>{race_note}
<div id="bar">Your name: <input id="annotator" value="" size="20">
<button id="save" type="button">Download my labels (CSV)</button>
<span id="progress"></span></div>
<form id="sheet"><div class="items">
{items}
</div></form>
<script>
(function () {{
  var form = document.getElementById("sheet");
  function rows() {{
    var out = [["item", "image_id", "label", "annotator", "monk", "age_bin", "quality", "race", "swatch_order"]];
    var who = document.getElementById("annotator").value.replace(/[\\r\\n,"]/g, " ").trim();
    var figs = form.querySelectorAll("figure");
    for (var i = 0; i < figs.length; i++) {{
      var f = figs[i], n = f.dataset.item;
      function pick(p) {{ var c = f.querySelector("input[name=" + p + n + "]:checked"); return c ? c.value : ""; }}
      out.push([n, f.dataset.imageId, pick("i"), who, pick("m"), pick("a"), pick("q"), pick("r"), window.swatchOrder]);
    }}
    return out;
  }}
  function csvCell(v) {{ v = String(v); return /[",\\n]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v; }}
  function update() {{
    var done = form.querySelectorAll("input[name^=i]:checked").length;
    document.getElementById("progress").textContent = done + " of {n} labelled";
  }}
{swatch_script}
  form.addEventListener("change", update);
  update();
  document.getElementById("save").addEventListener("click", function () {{
    var text = rows().map(function (r) {{ return r.map(csvCell).join(","); }}).join("\\n") + "\\n";
    var a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([text], {{type: "text/csv"}}));
    var who = document.getElementById("annotator").value.trim().replace(/[^A-Za-z0-9_-]+/g, "_");
    a.download = "labels_" + (who || "annotator") + ".csv";
    document.body.appendChild(a); a.click(); a.remove();
  }});
}})();
</script></body></html>
"""

_ITEM = """<figure data-item="{item}" data-image-id="{image_id}">{img}
<figcaption>#{item} <small>{image_id}</small><br>
<label><input type="radio" name="i{item}" value="female"> female</label>
<label><input type="radio" name="i{item}" value="male"> male</label>
<label><input type="radio" name="i{item}" value="unsure"> unsure</label>
{questions}</figcaption></figure>"""


def export_sheet(
    study: Study,
    n: int = 200,
    out_dir: Path | None = None,
    race: bool = False,
    by_attributes: bool = False,
    *,
    progress: bool = False,
) -> StageRun:
    """Write the annotation sheet (HTML + CSV) for a stratified sample of ``n`` >= 1 images;
    ``race``: also ask perceived race or ethnicity (opt-in, human answers only);
    ``by_attributes``: equal quotas per (source, label, tone group, age group). The
    ``validate_export`` stage of the catalogue; ``progress`` is unused (the stage signature)."""
    if n < 1:
        raise CorpusAuditError(f"validate export: --n must be >= 1, got {n}")
    with study.stage("validate_export", "label", "study") as run:
        cid = _classifier_for(study)
        sample = draw_sample(study, cid, n, by_attributes)
        out = Path(out_dir) if out_dir is not None else study.root / "validation"
        out.mkdir(parents=True, exist_ok=True)
        items_html, missing = _items(study, sample, race)
        title = html.escape(f"Perceived gender annotation: {study.config.study.name}")
        page = _PAGE.format(
            title=title,
            n=len(sample),
            items="\n".join(items_html),
            px=THUMBNAIL_PX,
            swatch_script=SWATCH_SCRIPT,
            race_note=RACE_NOTE if race else "",
        )
        sheet = out / "sheet.html"
        sheet.write_text(page, encoding="utf-8")
        table = _write_template(out / "sheet.csv", [s[0] for s in sample], race)
        with study.transaction() as con:
            con.execute("DELETE FROM validation_items")
            if sample:
                con.executemany(
                    "INSERT INTO validation_items VALUES (?, ?, ?, ?)",
                    [(i, s[0], cid, s[2]) for i, s in enumerate(sample, start=1)],
                )
        counts = Counter(s[2] for s in sample)
        run.rows_in = study.count("labels", "classifier = ?", [cid])
        run.rows_out = len(sample)
        run.summary = [{"stratum": s, "images": c} for s, c in sorted(counts.items())]
        if len(sample) < n:
            run.messages.append(f"only {len(sample)} labelled images available (asked for {n})")
        if missing:
            run.messages.append(f"{missing} images could not be read; shown as unavailable")
        run.messages.append(
            f"send {sheet.name} to each annotator; import their CSVs with "
            "`corpus-audit validate import DIR FILE...`"
        )
        run.outputs = {"sheet": str(sheet), "csv": str(table)}
        run.provenance.update(
            {
                "classifier": cid,
                "n": n,
                "strata": dict(counts),
                "race": race,
                "by_attributes": by_attributes,
            }
        )
    return run


def _items(study: Study, sample: list[tuple[str, str, str]], race: bool) -> tuple[list[str], int]:
    """The sheet's items (thumbnail and questions) and how many images could not be read."""
    items_html, missing = [], 0
    for item, (image_id, path, _) in enumerate(sample, start=1):
        uri = _thumbnail(study_image_path(study.root, path), study.config.images.max_pixels)
        if uri is None:
            missing += 1
            img = '<div class="missing">image unavailable</div>'
        else:
            img = f'<img alt="item {item}" src="{uri}">'
        items_html.append(
            _ITEM.format(
                item=item,
                image_id=html.escape(image_id, quote=True),
                img=img,
                questions=questions_html(item, race),
            )
        )
    return items_html, missing


def _write_template(table: Path, image_ids: list[str], race: bool) -> Path:
    """``sheet.csv``: the sheet's items with empty answer columns, to fill by hand."""
    extra = ["monk", "age_bin", "quality"] + (["race"] if race else [])
    with open(table, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["item", "image_id", "label", *extra])
        for item, image_id in enumerate(image_ids, start=1):
            writer.writerow([item, image_id, ""] + [""] * len(extra))
    return table


# -- import ---------------------------------------------------------------------------------------
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


def import_labels(study: Study, files: list[Path], *, progress: bool = False) -> StageRun:
    """Import annotator CSVs into ``human_labels``; report alpha and classifier agreement.
    The ``validate_import`` stage of the catalogue; ``progress`` is unused (the signature)."""
    with study.stage("validate_import", "label") as run:
        rows = read_annotations(study, [Path(f) for f in files])
        annotators = sorted({r[1] for r in rows})
        _store(study, rows, annotators)
        run.rows_in = len(rows)
        run.rows_out = len(rows)
        votes: dict[str, dict[str, str]] = defaultdict(dict)
        for image_id, annotator, label in study.con.execute(
            "SELECT image_id, annotator, label FROM human_labels WHERE label <> ''"
        ).fetchall():
            votes[image_id][annotator] = label
        cid = _classifier_for(study) if study.count("labels") else None
        classifier = (
            dict(
                study.con.execute(
                    "SELECT image_id, label FROM labels WHERE classifier = ?", [cid]
                ).fetchall()
            )
            if cid
            else {}
        )
        all_annotators = sorted({a for v in votes.values() for a in v})
        alpha = reliability(votes)
        alpha_sure = reliability(votes, drop_unsure=True)
        compared, agree, clf_ambiguous, no_majority, majority_unsure = _compare(votes, classifier)
        agreement = agree / compared if compared else None
        run.summary = [
            {"metric": "annotators", "value": len(all_annotators)},
            {"metric": "images annotated", "value": len(votes)},
            {"metric": "krippendorff_alpha (male/female/unsure)", "value": alpha},
            {"metric": "krippendorff_alpha (unsure as missing)", "value": alpha_sure},
            {"metric": f"agreement of {cid} with majority vote", "value": agreement},
            {"metric": "images compared (majority and classifier male/female)", "value": compared},
            {"metric": "classifier ambiguous", "value": clf_ambiguous},
            {"metric": "majority unsure", "value": majority_unsure},
            {"metric": "no majority (tie)", "value": no_majority},
        ]
        run.summary += _further_alphas(study)
        if alpha is None:
            run.messages.append("Krippendorff's alpha needs at least two annotators on an image")
        run.messages.append("reference (paper): alpha 0.948, 98 % agreement with the majority")
        run.provenance.update(
            {
                "files": [str(f) for f in files],
                "annotators_imported": annotators,
                "classifier": cid,
                "alpha": alpha,
                "alpha_unsure_as_missing": alpha_sure,
                "agreement": agreement,
            }
        )
    return run


def _store(study: Study, rows: list[tuple], annotators: list[str]) -> None:
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


def _further_alphas(study: Study) -> list[dict[str, Any]]:
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


def _compare(
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
