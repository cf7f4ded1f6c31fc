"""The annotation sheet of ``validate export``: the stratified sample, the page (thumbnails inlined,
every text escaped) and the CSV template."""

from __future__ import annotations

import csv
import hashlib
import html
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from corpus_audit.backends.classifiers import classifier_id
from corpus_audit.core.errors import StageOrderError
from corpus_audit.core.imagefile import study_image_path
from corpus_audit.core.store import Study
from corpus_audit.methods.stats import allocate
from corpus_audit.stages.validate.questions import SWATCH_SCRIPT, questions_html

#: ``thumbnail(path, max_pixels)``: a JPEG data URI of the image (longest side THUMBNAIL_PX),
#: or None when unreadable (the command passes the report's thumbnails)
Thumbnail = Callable[[Path, int], "str | None"]
#: ``prepare_strata(study)``: builds the temp table ``validation_groups`` the sample is drawn
#: over (the command passes the analysis's, :mod:`corpus_audit.stages.analyze.strata`)
PrepareStrata = Callable[[Study], object]

THUMBNAIL_PX = 320  # longest side of the inlined images
RACE_NOTE = (
    "<p><b>Perceived race or ethnicity</b> is asked because this study opted in: answer only "
    "what the image shows to you, or can't tell. No model estimates it; the answers are "
    "reported as aggregates only.</p>"
)


def classifier_for(study: Study) -> str:
    """The classifier whose labels are validated: ``label.classifier``'s, else the one
    classifier the study has labels of; :class:`StageOrderError` when none or several."""
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
    study: Study, cid: str, n: int, by_attributes: bool, prepare_strata: PrepareStrata
) -> list[tuple[str, str, str]]:
    """``[(image_id, path, stratum)]``: the stratified sample, in a stable shuffled order.

    Within a stratum images are ranked by ``sha256(seed:image_id)``, so the sample depends
    only on the study seed and the labels (not on DuckDB's hash or row order).
    ``by_attributes``: strata also split by perceived tone and age group (equal quotas per
    group, :mod:`corpus_audit.stages.analyze.strata`); ``prepare_strata`` builds the groups."""
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


PAGE = """<!DOCTYPE html>
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

ITEM = """<figure data-item="{item}" data-image-id="{image_id}">{img}
<figcaption>#{item} <small>{image_id}</small><br>
<label><input type="radio" name="i{item}" value="female"> female</label>
<label><input type="radio" name="i{item}" value="male"> male</label>
<label><input type="radio" name="i{item}" value="unsure"> unsure</label>
{questions}</figcaption></figure>"""


def items(
    study: Study, sample: list[tuple[str, str, str]], race: bool, thumbnail: Thumbnail
) -> tuple[list[str], int]:
    """The sheet's items (thumbnail and questions) and how many images could not be read."""
    items_html, missing = [], 0
    for item, (image_id, path, _) in enumerate(sample, start=1):
        uri = thumbnail(study_image_path(study.root, path), study.config.images.max_pixels)
        if uri is None:
            missing += 1
            img = '<div class="missing">image unavailable</div>'
        else:
            img = f'<img alt="item {item}" src="{uri}">'
        items_html.append(
            ITEM.format(
                item=item,
                image_id=html.escape(image_id, quote=True),
                img=img,
                questions=questions_html(item, race),
            )
        )
    return items_html, missing


def write_template(table: Path, image_ids: list[str], race: bool) -> Path:
    """``sheet.csv``: the sheet's items with empty answer columns, to fill by hand."""
    extra = ["monk", "age_bin", "quality"] + (["race"] if race else [])
    with open(table, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["item", "image_id", "label", *extra])
        for item, image_id in enumerate(image_ids, start=1):
            writer.writerow([item, image_id, ""] + [""] * len(extra))
    return table


def write_sheet(
    study: Study,
    sample: list[tuple[str, str, str]],
    out: Path,
    race: bool,
    thumbnail: Thumbnail,
) -> tuple[Path, Path, int]:
    """``sheet.html`` and ``sheet.csv`` of ``sample`` in ``out``; returns their paths and how
    many images could not be read (shown as unavailable)."""
    items_html, missing = items(study, sample, race, thumbnail)
    title = html.escape(f"Perceived gender annotation: {study.config.study.name}")
    page = PAGE.format(
        title=title,
        n=len(sample),
        items="\n".join(items_html),
        px=THUMBNAIL_PX,
        swatch_script=SWATCH_SCRIPT,
        race_note=RACE_NOTE if race else "",
    )
    sheet = out / "sheet.html"
    sheet.write_text(page, encoding="utf-8")
    table = write_template(out / "sheet.csv", [s[0] for s in sample], race)
    return sheet, table, missing
