"""``corpus-audit demo``: the audit on the bundled demo corpus, and the paper's published tables.

Three pages. **The caption audit** of the demo corpus (``corpus_audit/demo_data``, see its
NOTICE.md: real LAION-400M, MS-COCO and Conceptual Captions captions) is captions only: the
image URLs cannot be fetched offline and no Stable Diffusion or CLIP weights are reachable, so
the image stages (images, generate, label) find nothing to do and say so; the caption-side
stages run for real (DuckDB selection, spaCy + gender-guesser indicators, SBERT + FAISS
neighbours) and the report shows their results. **The amplification page** replays the
paper's published per-occupation %female tables (SD 1.4 and 1.5, ``demo_data/published``)
through ``corpus-audit amplify``: the per-prompt table beside the paper's Table 3, a T-vs-G
scatter per prompt with the amplification and de-amplification regions, the excluded pairs,
Wilson intervals of T (500 labelled images each). It is labelled as the published numbers:
no new measurement. **The leaderboard page** rates five text-to-image models from the BAFIS
arena's published human votes (``demo_data/bafis_arena``): per aspect and prompt language, Elo
with its shuffled-order interval, Bradley-Terry with its bootstrap interval, ranks from the
intervals, the win-rate heatmaps; labelled as the published votes.

Outputs, under the study directory:
- ``summary/indicator_summary.csv`` and ``summary/indicator_summary.html``: per occupation,
  captions and % with male / female / both / any indicator (caption text escaped); the page
  leads with one row per corpus and the pooled row (``summary/corpus_summary.csv``, from the
  study's ``corpus_summary`` table): the LAION row is the one compared with the paper's LAION
  share, and CC3M is flagged as hypernymized (declared in ``demo_data/corpora.toml``);
- ``summary/top_neighbors.html``: the top captions per prompt for a few occupations;
- ``report/report.html``: the study report (page 1);
- ``published/amplification.html`` (page 2) and its CSVs;
- ``published/leaderboard.html`` (page 3).

The demo samples 10 captions per occupation (keyword, no_indicators) and per prompt (nn,
nn_no_indicators) instead of the paper's 500: see ``DEMO_SAMPLE_SIZE``.
"""

from __future__ import annotations

import csv
import tomllib
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from corpus_audit.commands.amplify import amplify_wide
from corpus_audit.core.extras import require_demo
from corpus_audit.core.metrics import header
from corpus_audit.core.pipeline import init_study, run_all
from corpus_audit.core.store import StageRun, Study
from corpus_audit.report.context import neighbor_groups
from corpus_audit.report.leaderboard_page import write_leaderboard_page
from corpus_audit.report.visible import finalize
from corpus_audit.stages.indicators import indicator_summary
from corpus_audit.tables.corpora import PAPER_LAION_SHARE, corpus_rows, corpus_summary

CORPORA_FILE = "corpora.toml"  # demo_data/: the files' corpus groups, hypernymized ones
DEMO_FILES = (
    "laion400m_sample_10k.parquet",
    "coco_val2017_captions.parquet",
    "cc3m_val_captions.parquet",
)
PUBLISHED = {"sd14": "percent_female_sd14.tsv", "sd15": "percent_female_sd15.tsv"}
PUBLISHED_MODELS = {"sd14": "Stable Diffusion 1.4", "sd15": "Stable Diffusion 1.5"}
PAPER_TRAINING_N = 500  # every training %female of the paper is over 500 labelled images
PUBLISHED_TITLE = "The paper's published numbers, replayed through corpus_audit's analysis"
PUBLISHED_NOTE = (
    "Published numbers, not a new measurement. The per-occupation %female below are the "
    'figures of Seshadri, Singh & Elazar, "The Bias Amplification Paradox in Text-to-Image '
    'Generation" (Tables 6 and 7: LAION training images of the naive keyword sample, 500 '
    "labelled images per occupation, and Stable Diffusion 1.4 / 1.5 images for four prompts, "
    "perceived gender by CLIP ViT-L/14 at 0.9 after the MediaPipe one-face filter). "
    "corpus-audit amplify recomputes the amplification from them; the 'published' column is "
    "the paper's own Table 3. The tables are rounded to 0.1, so a mean can differ from the "
    "paper's in the second decimal. The demo corpus has no images: this page is what the "
    "analysis shows once a study has them."
)
LEADERBOARD_TITLE = "Human preference between five text-to-image models: the BAFIS arena's votes"
LEADERBOARD_NOTE = (
    "Published votes, not a new measurement. The ratings below are computed by corpus_audit "
    "from the 459 battle records the BAFIS authors published (T. Klassert, A. Ulges and B. Fu, "
    '"BAFIS: Dataset + Framework to assess occupational Bias and Human Preference in modern '
    'Text-to-image Models", RheinMain University of Applied Sciences, 2025; data from their '
    "repository, MIT licence file / CC BY 4.0, see demo_data/bafis_arena/README.md): real "
    "annotators compared images of DALL-E 3, Midjourney v6.1, FLUX.1-dev, Stable Diffusion 3 "
    "and Playground v2.5 for English and German MAGBIG/BAFIS prompts, 2024-08-19 to "
    "2024-09-10, on three aspects. Playground v2.5 was only shown with English prompts."
)
LEADERBOARD_ROUNDS = 1000
DEMO_OCCUPATIONS = ("doctor", "nurse", "chef", "teacher", "pilot", "student")
# The demo corpus has 860 occupation captions (most occupations fewer than 30): with the paper's
# 500 every subset would hold all of them and `nn` would equal `keyword`. 10 keeps the
# selection strategies distinct, so the similarity table shows what nearest neighbours do.
DEMO_SAMPLE_SIZE = 10
# The demo has no images, so its subsets cannot be cut at N labelled images: they are the first
# 10 captions of each ranking (select.sample_unit = "captions").
DEMO_SAMPLE_UNIT = "captions"
# summary/corpus_summary.csv: one row per corpus group, then the pooled row
CORPUS_COLUMNS = (
    "corpus",
    "files",
    "rows_total",
    "captions",
    "occupations",
    "mean_occupation_pct",
    "paper_pct",
    "pct_any_indicator",
    "ci_low",
    "ci_high",
    "with_indicator",
    "male_only",
    "female_only",
    "both_genders",
    "name_triggers",
    "hypernymized",
)
SUMMARY_COLUMNS = (
    "occupation",
    "captions",
    "pct_any_indicator",
    "pct_male_only",
    "pct_female_only",
    "pct_both",
)


def demo_corpus() -> list[str]:
    """Paths of the bundled demo corpus files."""
    folder = resources.files("corpus_audit").joinpath("demo_data")
    return [str(folder.joinpath(name)) for name in DEMO_FILES]


def demo_corpora() -> list[dict[str, Any]]:
    """The demo corpus files' groups and flags (``demo_data/corpora.toml``): ``file``,
    ``group``, ``hypernymized``, in the file's order."""
    folder = resources.files("corpus_audit").joinpath("demo_data")
    data = tomllib.loads(folder.joinpath(CORPORA_FILE).read_text(encoding="utf-8"))
    return list(data["corpus"])


def corpus_overrides() -> dict[str, Any]:
    """``corpus.groups`` and ``corpus.hypernymized`` of the demo study, from
    :func:`demo_corpora`."""
    corpora = demo_corpora()
    return {
        "groups": {c["file"]: c["group"] for c in corpora},
        "hypernymized": [c["group"] for c in corpora if c["hypernymized"]],
    }


def open_or_create(root: Path) -> Study:
    """The demo study at ``root``: reopened when it exists (stages resume), else created."""
    if (root / "study.toml").is_file():
        return Study.open(root)
    return init_study(
        root,
        demo_corpus(),
        overrides={
            "study": {"name": "demo", "seed": 0},
            "corpus": corpus_overrides(),
            "select": {"sample_size": DEMO_SAMPLE_SIZE, "sample_unit": DEMO_SAMPLE_UNIT},
            "neighbors": {"k": DEMO_SAMPLE_SIZE},
        },
    )


def run_demo(
    root: Path,
    *,
    progress: bool = True,
    echo: Callable[[StageRun], None] | None = None,
) -> dict[str, Path]:
    """Run every stage on the demo corpus and write the summary pages; returns output paths.
    Without the ``demo`` extra's libraries: one line naming it, before anything is written."""
    require_demo()
    with open_or_create(root) as study:
        for run in run_all(study, progress=progress):
            if echo is not None:
                echo(run)
        outputs = write_summary(study)
        outputs["amplification_page"] = write_published_page(study.root / "published")
        outputs["leaderboard_page"] = write_leaderboard(study.root / "published")
        report = study.last_run("report")
        if report is not None and report["provenance"].get("report_path"):
            outputs["report"] = Path(report["provenance"]["report_path"])
        elif (study.root / "report" / "report.html").is_file():
            outputs["report"] = study.root / "report" / "report.html"
        corpus_rows = (study.last_run("select") or {}).get("rows_in") or 0
        captions = study.count("captions")
    if echo is not None:
        done = StageRun("demo")
        done.rows_in, done.rows_out = corpus_rows, captions  # corpus rows -> occupation captions
        done.outputs = {name: str(path) for name, path in outputs.items()}
        done.messages.append(
            f"demo finished: {captions} of {corpus_rows} captions mention an occupation; "
            "open the HTML files below in a browser"
        )
        done.messages.append(f"page 1, the caption audit of the demo corpus: {outputs['report']}")
        done.messages.append(
            "page 2, amplification from the paper's published tables (published numbers, not "
            f"a new measurement): {outputs['amplification_page']}"
        )
        done.messages.append(
            "page 3, a leaderboard of five text-to-image models from the BAFIS arena's published "
            f"human votes (published votes, not a new measurement): {outputs['leaderboard_page']}"
        )
        echo(done)
    return outputs


def arena_votes_file() -> Path:
    """The BAFIS arena's published votes bundled with the demo (``demo_data/bafis_arena``)."""
    folder = resources.files("corpus_audit").joinpath("demo_data", "bafis_arena")
    return Path(str(folder.joinpath("bafis_arena_votes.json")))


def write_leaderboard(out_dir: Path) -> Path:
    """Page 3: the BAFIS arena's published votes as a leaderboard per aspect and prompt
    language (corpus_audit/report/leaderboard_page.py); its path."""
    return write_leaderboard_page(
        out_dir / "leaderboard.html",
        [arena_votes_file()],
        title=LEADERBOARD_TITLE,
        note=LEADERBOARD_NOTE,
        rounds=LEADERBOARD_ROUNDS,
        seed=0,
    )


def published_tables() -> list[tuple[str, Path]]:
    """(model name, path) of the paper's published tables bundled with the demo."""
    folder = resources.files("corpus_audit").joinpath("demo_data", "published")
    return [(PUBLISHED_MODELS[m], Path(str(folder.joinpath(f)))) for m, f in PUBLISHED.items()]


def published_table3() -> dict[str, dict[str, float]]:
    """The paper's Table 3 naive row per model: ``{model: {prompt or "average": mean A}}``."""
    folder = resources.files("corpus_audit").joinpath("demo_data", "published")
    text = folder.joinpath("table3_naive.csv").read_text(encoding="utf-8")
    out: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(text.splitlines()):
        out.setdefault(PUBLISHED_MODELS[row["model"]], {})[row["prompt"]] = float(row["mean_A"])
    return out


def write_published_page(out_dir: Path) -> Path:
    """Page 2: the published tables through ``corpus-audit amplify --report``; its path."""
    run = amplify_wide(
        published_tables(),
        out_dir,
        training_n=PAPER_TRAINING_N,
        report=True,
        title=PUBLISHED_TITLE,
        note=PUBLISHED_NOTE,
        reference=published_table3(),
    )
    return Path(run.outputs["report"])


def write_summary(study: Study) -> dict[str, Path]:
    """Write the per-occupation indicator summary (CSV + HTML) and the top-neighbour page."""
    rows = indicator_summary(study)
    out_dir = study.root / "summary"
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = _write_csv(out_dir / "indicator_summary.csv", SUMMARY_COLUMNS, rows)
    corpora = corpus_rows(study)
    corpus_csv = _write_csv(out_dir / "corpus_summary.csv", CORPUS_COLUMNS, corpora)
    examples = _indicator_examples(study)
    html_path = out_dir / "indicator_summary.html"
    html_path.write_text(
        _render(
            "summary.html.j2",
            rows=per_occupation_by_corpus(study, rows),
            columns=SUMMARY_COLUMNS,
            examples=examples,
            corpora=corpora,
            groups=[c["corpus"] for c in corpora if not c["pooled"]],
            paper_pct=PAPER_LAION_SHARE,
            confidence_pct=f"{study.config.analysis.confidence * 100:g}",
        ),
        encoding="utf-8",
    )
    outputs = {"summary_csv": csv_path, "corpus_csv": corpus_csv, "summary_html": html_path}
    neighbors = _top_neighbors(study)
    if neighbors:
        nn_path = out_dir / "top_neighbors.html"
        nn_path.write_text(_render("neighbors.html.j2", groups=neighbors), encoding="utf-8")
        outputs["top_neighbors_html"] = nn_path
    return outputs


def _write_csv(path: Path, columns: Sequence[str], rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` as a UTF-8 CSV with the header ``columns`` (other keys left out)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def per_occupation_by_corpus(study: Study, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pooled per-occupation ``rows`` with ``by_corpus``: corpus group -> (% with an
    indicator, captions) of that occupation in the group (absent when it has none)."""
    cells: dict[str, dict[str, tuple[float, int]]] = {}
    for r in corpus_summary(study):
        if r["occupation"] is None or r["corpus_group"] is None:
            continue
        cells.setdefault(r["occupation"], {})[r["corpus_group"]] = (
            r["pct_any_indicator"],
            r["captions"],
        )
    return [{**r, "by_corpus": cells.get(r["occupation"], {})} for r in rows]


def _indicator_examples(study: Study, per_label: int = 5) -> list[dict[str, Any]]:
    """A few captions per indicator label, with their triggers (shown escaped)."""
    cur = study.con.execute(
        """
        SELECT label, text, triggers FROM (
            SELECT i.label, c.text, i.triggers,
                   row_number() OVER (PARTITION BY i.label ORDER BY hash(c.caption_id, 7)) AS r
            FROM indicators i JOIN captions c USING (caption_id)
        ) WHERE r <= ? ORDER BY label, r
        """,
        [per_label],
    )
    return [{"label": a, "text": b, "triggers": c} for a, b, c in cur.fetchall()]


def _top_neighbors(study: Study, top: int = 5) -> list[dict[str, Any]]:
    """For a few demo occupations, each prompt's top captions by the `nn` strategy."""
    return neighbor_groups(study, list(DEMO_OCCUPATIONS), top)


def _render(template: str, **context: Any) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("corpus_audit.report", "templates"),
        autoescape=True,  # captions are scraped web text
        finalize=finalize,  # control characters in them shown as escapes
        undefined=jinja2.StrictUndefined,
    )
    env.globals["col"] = header  # column headers from corpus_audit.core.metrics
    return env.get_template(template).render(**context)
