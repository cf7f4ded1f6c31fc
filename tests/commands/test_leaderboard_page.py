"""The demo's leaderboard page (page 3): the BAFIS arena's published votes per aspect and
prompt language, rendered from the real file, its numbers those of the leaderboard functions,
data from the file escaped, and the page rendered by headless Chromium (figures decode, no
script, nothing external, no console or CSP complaint)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from cdp import Browser
from markupsafe import escape

from corpus_audit.commands.demo import LEADERBOARD_NOTE, arena_votes_file
from corpus_audit.methods.preferences.leaderboard import leaderboard
from corpus_audit.report.leaderboard_page import arena_votes, write_leaderboard_page

ROUNDS = 200


@pytest.fixture(scope="module")
def votes_path(shared_data: Path) -> Path:
    return shared_data / "bafis_arena" / "bafis_arena_votes.json"


@pytest.fixture(scope="module")
def page(tmp_path_factory, votes_path) -> Path:
    out = tmp_path_factory.mktemp("leaderboard") / "leaderboard.html"
    return write_leaderboard_page(
        out, [votes_path], title="BAFIS arena", note=LEADERBOARD_NOTE, rounds=ROUNDS
    )


def test_bundled_votes_are_the_published_file(votes_path):
    assert arena_votes_file().read_bytes() == votes_path.read_bytes()
    notice = (arena_votes_file().parent / "README.md").read_text(encoding="utf-8")
    assert "Klassert" in notice and "CC BY 4.0" in notice
    assert (arena_votes_file().parent / "LICENSE-BAFIS.txt").is_file()


def test_page_shows_the_leaderboard_numbers(page, votes_path):
    text = page.read_text(encoding="utf-8")
    assert "Published votes, not a new measurement" in text
    assert "459 battle records (2024-08-19 to 2024-09-10)" in text
    assert "bias 454; image quality 456; prompt alignment 454." in text
    ratings = leaderboard(arena_votes([votes_path]), rounds=ROUNDS, seed=0)
    for (aspect, language), part in ratings.groupby(["aspect", "language"]):
        table = re.search(
            rf'<table id="ratings-{aspect}-{language}".*?</table>', text, flags=re.S
        ).group(0)
        rows = re.findall(r"<tr><td class=\"n\">(\d+)</td><td>([^<]+)</td>(.*?)</tr>", table, re.S)
        assert len(rows) == len(part)
        for (rank, model, rest), rec in zip(rows, part.to_dict("records"), strict=True):
            assert (int(rank), html.unescape(model)) == (rec["rank"], rec["model_id"])
            cells = re.findall(r"-?\d+\.\d", rest)
            expected = [rec[c] for c in ("bt_rating", "bt_ci_low", "bt_ci_high")]
            expected += [rec[c] for c in ("elo_median", "elo_ci_low", "elo_ci_high", "elo")]
            assert [float(c) for c in cells] == pytest.approx(expected, abs=0.051)
        # rows in the order of the one rank column (ties by the Bradley-Terry rating)
        ranked = [(r["rank"], -r["bt_rating"]) for r in part.to_dict("records")]
        assert ranked == sorted(ranked)
        heads = re.findall(r"<th>(.*?)</th>", table, re.S)
        assert [h for h in heads if "rank" in h] == [
            "rank (Bradley-Terry, 95 % bootstrap intervals)"
        ]
    # German prompts: Playground v2.5 was never shown, so it has no German row
    de = re.search(r'<table id="ratings-bias-de".*?</table>', text, flags=re.S).group(0)
    assert "playground-v2-5" not in de


def test_model_names_from_the_file_are_escaped(tmp_path):
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    battles = [
        {"model_a": evil, "model_b": "m2", "winner": w, "tstamp": 1.7e9 + i, "language": "en"}
        for i, w in enumerate(["model_a", "model_b", "tie", "model_a", "tie (bothbad)"])
    ]
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(battles), encoding="utf-8")
    out = write_leaderboard_page(tmp_path / "p.html", [path], title="t", note="n", rounds=20)
    text = out.read_text(encoding="utf-8")
    assert "<script" not in text and "<img src=x" not in text
    assert str(escape(evil)) in text  # as Jinja's autoescape writes it


def test_page_renders_in_chromium(page, tmp_path):
    with Browser(tmp_path / "profile", tmp_path / "downloads") as browser:
        browser.open(page.as_uri())
        out = browser.evaluate(
            """(function () {
              var imgs = Array.prototype.slice.call(document.images);
              var tables = document.querySelectorAll('table.leaderboard:not(.overview)');
              var overview = document.getElementById('overview');
              var rows = Array.prototype.map.call(tables, function (t) {
                return t.querySelectorAll('tbody tr').length; });
              return {
                images: imgs.length,
                broken: imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).length,
                min_width: Math.min.apply(null, imgs.map(function (i) { return i.getBoundingClientRect().width; })),
                tables: tables.length, rows: rows,
                scripts: document.scripts.length,
                external: performance.getEntriesByType('resource').map(function (e) { return e.name; })
                  .filter(function (n) { return !n.startsWith('data:'); }),
                height: document.body.scrollHeight,
                overview_rows: overview.querySelectorAll('tbody tr').length,
                overview_top: overview.getBoundingClientRect().top,
                rank_headers: Array.prototype.map.call(tables, function (t) {
                  return Array.prototype.filter.call(t.querySelectorAll('thead th'),
                    function (h) { return /rank/.test(h.textContent); }).length; })
              };
            })()"""
        )
        problems = browser.problems()
    assert problems == []
    # 3 aspects x (all, de, en): 9 rating tables, 9 heatmaps and 3 interval figures
    assert out["tables"] == 9 and out["images"] == 12 and out["broken"] == 0
    assert out["min_width"] > 200
    # all and en: five models; de: four (no Playground v2.5 with German prompts)
    assert sorted(out["rows"]) == [4, 4, 4, 5, 5, 5, 5, 5, 5]
    assert out["scripts"] == 0 and out["external"] == []
    assert out["height"] > 2000
    assert out["overview_rows"] == 5 and out["overview_top"] < 900  # on the first screen
    assert out["rank_headers"] == [1] * 9  # one (labelled) rank column per table


def test_overview_ranks_models_by_aspect(page, votes_path):
    """The models x aspects table at the top: per cell the rank and Bradley-Terry rating of
    the all-prompts table, rows by the mean rank over the aspects."""
    text = page.read_text(encoding="utf-8")
    table = re.search(r'<table id="overview".*?</table>', text, flags=re.S).group(0)
    assert text.index('id="overview"') < text.index('id="ratings-')
    ratings = leaderboard(arena_votes([votes_path]), rounds=ROUNDS, seed=0)
    everything = ratings[ratings["language"] == "all"]
    aspects = list(everything["aspect"].drop_duplicates())
    rows = re.findall(r"<tr><td>([^<]+)</td>(.*?)</tr>", table, re.S)
    assert len(rows) == everything["model_id"].nunique() == 5
    means = []
    for model, rest in rows:
        cells = re.findall(r"<strong>#(\d+)</strong> (-?\d+\.\d)", rest)
        mine = everything[everything["model_id"] == html.unescape(model)].set_index("aspect")
        assert [int(r) for r, _ in cells] == [int(mine.loc[a, "rank"]) for a in aspects]
        assert [float(v) for _, v in cells] == pytest.approx(
            [mine.loc[a, "bt_rating"] for a in aspects], abs=0.051
        )
        mean = float(re.findall(r'<td class="n">(\d+\.\d)</td>', rest)[-1])
        assert mean == pytest.approx(mine["rank"].mean(), abs=0.051)
        means.append(mean)
    assert means == sorted(means)
