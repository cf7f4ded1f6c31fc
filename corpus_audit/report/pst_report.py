"""Stage ``pst_report``: ``<study>/report/pst.html`` and a CSV of every PST table.

The page (Jinja2 ``report/templates/pst.html.j2``, autoescape on: roles, prompts and captions
are escaped; figures are PNG ``data:`` URIs, also written to ``report/figures/``) shows the
face-rule funnel, SS overall and per stereotype, the single-vs-paired gap, PST-Both/Any, SS
per role beside the corpus's own (caption-side) %female and SS, the labour-statistics scatter
and correlation, SS per power occupation and the FairCritic rounds. Long tables show their
first :data:`MAX_ROWS` rows; the CSVs in ``report/pst/`` (one per table of
``sql/schema/002_pst.sql``, written whole and replaced atomically) hold every row.
"""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any

from corpus_audit import __version__
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.report.figures import save
from corpus_audit.report.pst_figures import labor_scatter
from corpus_audit.report.render import render
from corpus_audit.tables.pst_frames import read_frame

NAME = "pst_report"
PAGE = ("report", "pst.html")
CSV_DIR = ("report", "pst")
MAX_ROWS = 200
CSV_TABLES = (
    "pst_prompts", "pst_face_filter", "pst_people", "pst_rounds", "pst_caption_files",
    "pst_caption_mentions", "pst_caption_roles", "pst_scores", "pst_gap", "pst_both_any",
    "pst_labor", "pst_labor_correlation",
)  # fmt: skip
# (id, title, query: a sql/ file name or one line of SQL, note)
SECTIONS = (
    ("funnel", "Images and the face rule", "pst_report/funnel.sql",
     "Paired and power images need exactly two large faces; single images the one-face rule."),
    ("overall", "Stereotype Score", "SELECT side, kind, variant, scope, group_name, n_units, "
     "n_classified, n_stereotyped, ss, ci_low, ci_high FROM pst_scores WHERE scope IN "
     "('overall', 'stereotype') ORDER BY side DESC, kind, variant, scope, group_name", ""),
    ("gap", "Single vs paired", "SELECT * FROM pst_gap WHERE scope <> 'role' "
     "ORDER BY side DESC, kind, variant, scope, group_name", "Per-role gaps are in pst_gap.csv."),
    ("both", "PST-Both and PST-Any", "SELECT * FROM pst_both_any ORDER BY side DESC, kind, variant", ""),
    ("roles", "Per role: generated images beside the corpus", "pst_report/roles.sql",
     "caption_*: the corpus's own captions that attach a gender to the role (pst_captions)."),
    ("corpus_roles", "Per role in the corpus captions", "SELECT * FROM pst_caption_roles "
     "ORDER BY stereotype DESC, role", "Captions whose parse attaches a gender to the role; "
     "n_both (a woman and a man) is left out of %female and SS."),
    ("labor", "Labour statistics", "SELECT * FROM pst_labor_correlation ORDER BY side DESC, kind, variant",
     "Pearson r across roles of perceived (caption: attached) %female vs BLS 2024 % women."),
    ("occupations", "Power prompts per occupation", "SELECT kind, variant, group_name, n_units, "
     "n_classified, ss, ci_low, ci_high FROM pst_scores WHERE scope = 'occupation' "
     "ORDER BY kind, variant, group_name", ""),
    ("faircritic", "FairCritic rounds", "SELECT model_id, prompt_id, round, prompt_text, n_images, "
     "n_kept, n_classified, ss, biased, feedback FROM pst_rounds ORDER BY model_id, prompt_id, round", ""),
)  # fmt: skip


def _cell(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if column in ("r", "p_value") else f"{value:.1f}"
    return str(value)


def section(study: Study, key: str, title: str, query: str, note: str) -> dict[str, Any]:
    """One section of the page: its columns and first :data:`MAX_ROWS` rows, as text."""
    cur = study.sql(query) if query.endswith(".sql") else study.con.execute(query)
    columns = [d[0] for d in cur.description]
    rows = cur.fetchall()
    cells = [[_cell(c, v) for c, v in zip(columns, r, strict=True)] for r in rows[:MAX_ROWS]]
    more = max(0, len(rows) - MAX_ROWS)
    return {"id": key, "title": title, "note": note, "columns": columns, "rows": cells,
            "more": more, "figures": []}  # fmt: skip


def labor_figures(study: Study, out_dir: Path) -> list[dict[str, str]]:
    """The perceived (attached) vs labour %female scatter of each side, kind and variant."""
    labor = read_frame(study, "pst_labor")
    corr = read_frame(study, "pst_labor_correlation")
    out = []
    for (side, kind, variant), rows in labor.groupby(["side", "kind", "variant"], sort=True):
        match = corr[(corr["side"] == side) & (corr["kind"] == kind) & (corr["variant"] == variant)]
        r = p = None
        if len(match) and match["r"].notna().iloc[0]:
            r, p = float(match["r"].iloc[0]), float(match["p_value"].iloc[0])
        who = "generated images" if side == "image" else "corpus captions"
        fig = labor_scatter(rows, r, p, title=f"{kind} / {variant} ({who})",
                            ylabel=f"%female ({who})")  # fmt: skip
        if fig is None:  # no role with both numbers: no figure (the tables say why)
            continue
        name = f"pst_labor_{side}_{kind}_{variant}"
        saved = save(fig, name, f"{kind} {variant}: %female vs labour statistics", "", out_dir)
        uri = "data:image/png;base64," + base64.b64encode(saved.png).decode("ascii")
        out.append({"uri": uri, "title": saved.title, "caption": f"{who}: {kind}, {variant}"})
    return out


def write_csvs(study: Study, out_dir: Path) -> list[Path]:
    """Every PST table as ``<out_dir>/<table>.csv`` (written to a temp file, then renamed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for table in CSV_TABLES:
        path = out_dir / f"{table}.csv"
        tmp = path.with_suffix(".csv.tmp")
        read_frame(study, table).rename(
            columns={"group": "group_name", "order": "role_order"}
        ).to_csv(tmp, index=False)
        tmp.replace(path)
        paths.append(path)
    return paths


@stage_body(NAME)
def pst_report(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Write the PST page and the CSVs; see the module docstring."""
    cfg = study.config
    page = study.path(*PAGE)
    page.parent.mkdir(parents=True, exist_ok=True)
    csv_dir = study.path(*CSV_DIR)
    sections = [section(study, *spec) for spec in SECTIONS]
    by_id = {s["id"]: s for s in sections}
    by_id["labor"]["figures"] = labor_figures(study, page.parent / "figures")
    html = render(
        {
            "title": f"{cfg.study.name}: Paired Stereotype Test",
            "version": __version__,
            "csv_dir": str(csv_dir),
            "sections": sections,
            "bootstrap": cfg.analysis.bootstrap,
            "confidence": cfg.analysis.confidence,
        },
        "pst.html.j2",
    )
    tmp = page.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(page)
    csvs = write_csvs(study, csv_dir)
    run.rows_in = sum(len(s["rows"]) for s in sections)
    run.rows_out = 1 + len(csvs)
    run.outputs["report"] = str(page)
    run.outputs["csv"] = str(csv_dir)
    run.provenance.update(report_path=str(page), csvs=[p.name for p in csvs])
    return run
