"""Every figure function of the report package on real data: no word written twice in a row
in its titles, axis and legend labels (the check reads the words `figures.save` records); a
legend never inside the data (figure-level, outside the axes); and, given no data, None
instead of empty axes.

Real data: a study of real LAION and COCO captions and real photos (tests/study_builder.py)
through `analyze`, the report's own figure jobs; the BAFIS arena's published votes (the
leaderboard page); real COCO captions with the study builder's word rule for the who/how
deciles and the who scatter.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from study_builder import build

from corpus_audit.methods.lexicon import load_labor_stats
from corpus_audit.methods.preferences.leaderboard import leaderboard, pairs
from corpus_audit.methods.texts.who import decile_counts, percent_women
from corpus_audit.report import figures as figs
from corpus_audit.report import preference_figures as pf
from corpus_audit.report.context import (
    draw_figure,
    figure_jobs,
    indicators_section,
    results_section,
    similarity_section,
)
from corpus_audit.report.leaderboard_page import arena_votes, interval_figure, win_rate_heatmap
from corpus_audit.report.pst_figures import labor_scatter
from corpus_audit.report.who_how_figures import decile_figure, who_scatter

# occupations of the bundled BLS table that COCO captions name with a gender word
OCCUPATIONS = ("cook", "baker", "driver", "farmer", "teacher", "nurse", "guard", "chef")


def test_repeated_words_finds_the_reported_defect():
    assert figs.repeated_words("% women among associated associated texts") == ["associated"]
    assert figs.repeated_words("Win rate: wins / (wins + losses)") == []
    assert figs.repeated_words("The the end; 50 50") == ["The", "50"]


@pytest.fixture(scope="module")
def report_figures(tmp_path_factory, shared_data: Path) -> list[tuple[str, object]]:
    """(kind, figure) of every figure job of a real study's report (the report's own
    sections and jobs, without rendering the page)."""
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.analyze import analyze

    corpus = [
        shared_data / "laion400m_sample_10k.parquet",
        shared_data / "coco_val2017_captions.parquet",
    ]
    root = tmp_path_factory.mktemp("figlabels") / "study"
    with init_study(root, [str(corpus[0])], overrides={"analysis": {"bootstrap": 200}}) as study:
        build(study, corpus)
        analyze(study, progress=False)
        ctx = {
            "results": results_section(study),
            "indicators": indicators_section(study),
            "similarity": similarity_section(study),
        }
        jobs = figure_jobs(study, ctx)
        return [(kind, draw_figure(kind, args, ctx)[0]) for kind, args in jobs]


def _who(shared_data: Path) -> pd.DataFrame:
    """% women among the real COCO captions naming an occupation that carry a gender word."""
    from study_builder import indicator_label

    texts = duckdb.sql(
        f"SELECT caption FROM read_parquet('{shared_data / 'coco_val2017_captions.parquet'}') "
    ).fetchall()
    occ, lab = [], []
    for (text,) in texts:
        for o in OCCUPATIONS:
            if re.search(rf"\b{o}s?\b", text.lower()):
                label = indicator_label(text)
                if label in ("male", "female"):
                    occ.append(o)
                    lab.append(label)
    return percent_women(occ, lab, load_labor_stats())


@pytest.fixture(scope="module")
def other_figures(shared_data: Path) -> list[tuple[str, object]]:
    """The leaderboard page's and the who/how section's figures on real data."""
    votes = arena_votes([shared_data / "bafis_arena" / "bafis_arena_votes.json"])
    ratings = leaderboard(votes, rounds=50, seed=0)
    pair_rows = pairs(votes)
    bias = pair_rows[(pair_rows["aspect"] == "bias") & (pair_rows["language"] == "all")]
    who = _who(shared_data)
    return [
        ("leaderboard intervals", interval_figure(ratings, "bias")),
        ("leaderboard heatmap", win_rate_heatmap(bias, "Win rate: bias, all prompts")),
        ("who deciles", decile_figure(decile_counts(who, min_associated=5), "associated texts")),
        ("who scatter", who_scatter(who, 5, "associated texts of COCO")),
    ]


def test_every_figure_has_labels_without_repeated_words(report_figures, other_figures):
    figures = list(report_figures)
    kinds = {k for k, _ in figures}
    assert {"scatter", "bars", "indicators", "similarity"} <= kinds, kinds
    figures += other_figures
    assert all(fig is not None for _, fig in figures)
    checked = 0
    for name, fig in figures:
        saved = figs.save(fig, name.replace(" ", "_"), name, "", None)
        assert len(saved.texts) >= 2, name  # at least a title and an axis label
        for text in saved.texts:
            assert figs.repeated_words(text) == [], (name, text)
            checked += 1
    assert checked > 30
    # the who/how axis that read "% women among associated associated texts"
    deciles = dict(figures)["who deciles"]
    assert deciles.axes[0].get_xlabel() == "% women among associated texts"


def test_legends_stand_outside_the_data(report_figures, other_figures):
    """No legend of these figures lives inside an axes: each is a figure legend whose box
    does not overlap any data panel."""
    figures = dict(report_figures)
    others = dict(other_figures)
    for name in ("bars", "indicators"):
        _assert_legend_outside(figures[name], name)
    for name in ("leaderboard intervals", "who deciles"):
        _assert_legend_outside(others[name], name)


def _assert_legend_outside(fig, name: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # lay out (constrained layout places the outside legends)
    assert all(ax.get_legend() is None for ax in fig.axes), name
    assert fig.legends, name
    renderer = canvas.get_renderer()
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), name


def test_indicator_bars_carry_intervals_and_n(report_figures):
    fig = dict(report_figures)["indicators"]
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names and all(re.search(r"\(N = \d+\)$", n) for n in names)
    whiskers = [c for c in ax.collections if c.get_segments()]
    assert whiskers and len(whiskers[0].get_segments()) == len(names)


def test_no_data_gives_none_not_empty_axes():
    empty = pd.DataFrame(
        columns=["aspect", "language", "model_id", "elo", "elo_median", "elo_ci_low",
                 "elo_ci_high", "bt_rating", "rank"]
    )  # fmt: skip
    no_pairs = pd.DataFrame(columns=["model_id", "opponent", "win_rate", "battles"])
    who = percent_women([], [])
    labor = pd.DataFrame(
        columns=["role", "stereotype", "labor_percent_female", "percent_female", "ci_low",
                 "ci_high"]
    )  # fmt: skip
    cats = pd.DataFrame(
        columns=["language", "prompt_set", "variant", "category", "model_id", "percent_female",
                 "ci_low", "ci_high", "official_pf"]
    )  # fmt: skip
    layout = [{"strategy": "keyword", "#1": None, "average": {"mean": None}}]
    assert figs.scatter_grid("m", [{"strategy": "keyword", "template_id": 1,
                                    "training_pf": None, "generated_pf": 40.0,
                                    "excluded": False, "occupation": "chef"}], [1], ["keyword"]) is None  # fmt: skip
    assert figs.amplification_bars("m", layout, ["#1", "average"]) is None
    assert figs.indicator_bars([{"occupation": "chef", "pct_any": None, "n_captions": 0}]) is None
    assert figs.similarity_plot([{"strategy": "nn", "mean_similarity": None}]) is None
    assert figs.correlation_scatter([], None, None) is None
    assert pf.rating_intervals(empty) is None
    assert pf.pair_heatmap(no_pairs, "win_rate", "win rate", "t") is None
    assert pf.category_bars(cats, "de") is None
    assert decile_figure(decile_counts(who)) is None
    assert who_scatter(who) is None
    assert labor_scatter(labor, None, None) is None
    with pytest.raises(figs.NoFigureError):
        figs.save(None, "x", "", "", None)
