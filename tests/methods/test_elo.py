"""Elo, its spread over battle orders, Bradley-Terry and pair counts (METHODS §3).

Expected values are computed here independently: the Elo example by hand, the order spread by
a plain-Python loop with Python's own shuffle and quantiles, Bradley-Terry by its closed form
(two models) and by Zermelo's iteration (Hunter's MM algorithm), a different method than the
code's scipy fit.
"""

from __future__ import annotations

import io
import math
import random
import statistics

import numpy as np
import pandas as pd
import pytest

from corpus_audit.core.errors import RatingError
from corpus_audit.methods.preferences.elo import (
    ELO_COLUMNS,
    RATING_COLUMNS,
    bradley_terry,
    bt_fit,
    bt_fit_many,
    elo_bootstrap,
    elo_ratings,
    pair_matrix,
    preference_ratings,
    score_a,
)
from corpus_audit.report.figures import save
from corpus_audit.report.preference_figures import rating_intervals, win_rate_heatmap


def battles(rows, aspect: str = "bias") -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["model_a", "model_b", "vote"])
    frame["aspect"] = aspect
    return frame


def test_three_battles_by_hand():
    # 1. A beats B: both expected 0.5, so A = 1000 + 4 * 0.5, B = 1000 - 4 * 0.5.
    a, b, c = 1000 + 4 * 0.5, 1000 - 4 * 0.5, 1000.0
    # 2. B vs C, a draw (vote 2): B (998) expected 1 / (1 + 10^(2/400)).
    e_b = 1 / (1 + 10 ** ((c - b) / 400))
    e_c = 1 / (1 + 10 ** ((b - c) / 400))
    b, c = b + 4 * (0.5 - e_b), c + 4 * (1 - 0.5 - e_c)
    # 3. C (as A) vs A (as B), vote 1: the B side, model A, wins.
    e_c = 1 / (1 + 10 ** ((a - c) / 400))
    e_a = 1 / (1 + 10 ** ((c - a) / 400))
    c, a = c + 4 * (0 - e_c), a + 4 * (1 - 0 - e_a)
    assert (a, b, c) == pytest.approx((1003.98842093, 998.01151280, 998.00006627), abs=1e-8)
    table = elo_ratings(battles([("A", "B", 0), ("B", "C", 2), ("C", "A", 1)]))
    got = dict(zip(table["model_id"], table["elo"], strict=True))
    assert got == pytest.approx({"A": a, "B": b, "C": c}, abs=1e-9)
    assert list(table["n_battles"]) == [2, 2, 2]
    assert sum(got.values()) == pytest.approx(3000)  # Elo with equal k conserves points


def test_votes_other_than_0_and_1_are_draws():
    assert list(score_a([0, 1, 2, None, float("nan"), "x", 0.0, 1.0, -1, " 0", True])) == [
        1.0,
        0.0,
        0.5,
        0.5,
        0.5,
        0.5,
        1.0,
        0.0,
        0.5,
        1.0,
        0.5,
    ]
    draw = elo_ratings(battles([("A", "B", "tie")]))
    assert list(draw["elo"]) == [1000.0, 1000.0]


def plain_elo(rows: list[tuple[str, str, float]], order: list[int]) -> dict[str, float]:
    """Elo by the METHODS formulas, one battle at a time, plain Python."""
    rating: dict[str, float] = {}
    for index in order:
        ma, mb, s = rows[index]
        ra, rb = rating.setdefault(ma, 1000.0), rating.setdefault(mb, 1000.0)
        ea = 1 / (1 + 10 ** ((rb - ra) / 400))
        eb = 1 / (1 + 10 ** ((ra - rb) / 400))
        rating[ma] = ra + 4 * (s - ea)
        rating[mb] = rb + 4 * (1 - s - eb)
    return rating


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    rng = random.Random(11)
    models = ["flux", "sd14", "sd15", "dalle"]
    strength = {"flux": 1.0, "sd14": 0.0, "sd15": 0.3, "dalle": 0.8}
    rows = []
    for aspect in ("bias", "image_quality"):
        for _ in range(60):
            ma, mb = rng.sample(models, 2)
            p = 1 / (1 + math.exp(strength[mb] - strength[ma]))
            u = rng.random()
            rows.append((ma, mb, 0 if u < 0.85 * p else (1 if u < 0.85 else 2), aspect))
    return pd.DataFrame(rows, columns=["model_a", "model_b", "vote", "aspect"])


def test_spread_over_orders_matches_a_plain_loop(sample: pd.DataFrame):
    rounds = 200
    orders, expected = {}, {}
    for aspect, group in sample.groupby("aspect"):
        rows = [
            (a, b, 1.0 if v == 0 else 0.0 if v == 1 else 0.5)
            for a, b, v in zip(group["model_a"], group["model_b"], group["vote"], strict=True)
        ]
        rng = random.Random(f"orders-{aspect}")
        drawn = []
        per_model: dict[str, list[float]] = {}
        for _ in range(rounds):
            order = list(range(len(rows)))
            rng.shuffle(order)
            drawn.append(order)
            for model, value in plain_elo(rows, order).items():
                per_model.setdefault(model, []).append(value)
        orders[aspect] = np.array(drawn)
        given = plain_elo(rows, list(range(len(rows))))
        for model, values in per_model.items():
            cuts = statistics.quantiles(values, n=40, method="inclusive")  # 2.5 % ... 97.5 %
            expected[(aspect, model)] = (given[model], statistics.median(values), cuts[0], cuts[-1])
    table = elo_bootstrap(sample, orders=orders)
    assert list(table.columns) == list(ELO_COLUMNS)
    assert len(table) == len(expected) == 8
    for row in table.to_dict("records"):
        want = expected[(row["aspect"], row["model_id"])]
        got = (row["elo"], row["elo_median"], row["elo_ci_low"], row["elo_ci_high"])
        assert got == pytest.approx(want, abs=1e-9)
        assert row["rounds"] == rounds and row["method"] == "given"


def test_seeded_orders_are_reproducible_and_cover_the_given_order(sample: pd.DataFrame):
    first = elo_bootstrap(sample, rounds=300, seed=5)
    assert first.equals(elo_bootstrap(sample, rounds=300, seed=5))
    other = elo_bootstrap(sample, rounds=300, seed=6)
    assert not first["elo_median"].equals(other["elo_median"])
    assert (first["elo_ci_low"] <= first["elo_median"]).all()
    assert (first["elo_median"] <= first["elo_ci_high"]).all()
    # an aspect's intervals do not depend on the other aspects in the table
    alone = elo_bootstrap(sample[sample.aspect == "bias"], rounds=300, seed=5)
    assert alone.equals(first[first.aspect == "bias"].reset_index(drop=True))
    resampled = elo_bootstrap(sample, rounds=300, seed=5, method="resample")
    assert set(resampled["method"]) == {"resample"}
    # resampling adds sampling noise: wider intervals than shuffling alone
    width = lambda t: (t["elo_ci_high"] - t["elo_ci_low"]).mean()  # noqa: E731
    assert width(resampled) > width(first)


def test_bt_two_models_closed_form():
    # A beats B 30 times of 40: p = 3/4, R_A - R_B = 400 log10(3), mean 1000.
    rows = [("A", "B", 0)] * 20 + [("B", "A", 1)] * 10 + [("A", "B", 1)] * 6 + [("B", "A", 0)] * 4
    table = bradley_terry(battles(rows), rounds=0).set_index("model_id")
    gap = 400 * math.log10(3)
    assert table.loc["A", "bt_rating"] == pytest.approx(1000 + gap / 2, abs=1e-3)
    assert table.loc["B", "bt_rating"] == pytest.approx(1000 - gap / 2, abs=1e-3)
    assert table["bt_ci_low"].isna().all()
    # ten draws count as half a win each: 35 of 50 points
    with_ties = bradley_terry(battles(rows + [("A", "B", 2)] * 10), rounds=0).set_index("model_id")
    gap = 400 * math.log10(35 / 15)
    assert with_ties.loc["A", "bt_rating"] == pytest.approx(1000 + gap / 2, abs=1e-3)


def zermelo(rows: list[tuple[str, str, float]]) -> dict[str, float]:
    """Bradley-Terry by Hunter's MM iteration, on the Elo scale with mean 1000."""
    models = sorted({m for r in rows for m in r[:2]})
    points = dict.fromkeys(models, 0.0)
    games: dict[tuple[str, str], int] = {}
    for a, b, s in rows:
        points[a] += s
        points[b] += 1 - s
        games[(a, b)] = games.get((a, b), 0) + 1
        games[(b, a)] = games.get((b, a), 0) + 1
    p = dict.fromkeys(models, 1.0)
    for _ in range(5000):
        new = {}
        for i in models:
            denom = sum(n / (p[i] + p[j]) for (x, j), n in games.items() if x == i)
            new[i] = points[i] / denom
        log_mean = sum(math.log(v) for v in new.values()) / len(new)
        p = {m: v / math.exp(log_mean) for m, v in new.items()}
    return {m: 1000 + 400 * math.log10(v) for m, v in p.items()}


def test_bt_recovers_known_strengths_like_an_independent_fit():
    true = {"m1": 870.0, "m2": 960.0, "m3": 1040.0, "m4": 1130.0}  # mean 1000
    rng = random.Random(3)
    rows = []
    for _ in range(6000):
        a, b = rng.sample(sorted(true), 2)
        p_a = 1 / (1 + 10 ** ((true[b] - true[a]) / 400))
        rows.append((a, b, 0 if rng.random() < p_a else 1))
    table = bradley_terry(battles(rows), rounds=200, seed=1).set_index("model_id")
    mm = zermelo([(a, b, 1.0 if v == 0 else 0.0) for a, b, v in rows])
    for model, value in true.items():
        assert table.loc[model, "bt_rating"] == pytest.approx(mm[model], abs=0.01)
        assert abs(table.loc[model, "bt_rating"] - value) < 25  # sampling error at n = 6000
        assert table.loc[model, "bt_ci_low"] < table.loc[model, "bt_rating"]
        assert table.loc[model, "bt_rating"] < table.loc[model, "bt_ci_high"]
    assert table["bt_rating"].mean() == pytest.approx(1000)


def test_bootstrap_refits_match_scipy_fits_one_by_one():
    # the vectorised Newton refits give the scipy optimum of each resample, also when a
    # model never lost (separated: the ridge alone keeps it finite)
    rng = np.random.default_rng(4)
    won = rng.integers(0, 12, size=(6, 3, 3)).astype(float)
    won[:, [0, 1, 2], [0, 1, 2]] = 0.0
    won[5, 1, 0] = won[5, 2, 0] = 0.0  # round 5: model 0 never lost
    n = won + won.transpose(0, 2, 1)
    many = bt_fit_many(won, n, np.zeros((6, 3)))
    for r in range(6):
        assert many[r] == pytest.approx(bt_fit(won[r], n[r]), abs=1e-6)
    assert many[5, 0] > 5  # far above the others, but finite


def test_pair_matrix_counts_by_hand():
    rows = [("A", "B", 0), ("B", "A", 0), ("A", "B", 2), ("A", "B", 0), ("C", "A", 1)]
    table = pair_matrix(battles(rows)).set_index(["model_id", "opponent"])
    ab = table.loc[("A", "B")]
    # A vs B: A won rows 1 and 4, lost row 2, drew row 3
    assert (ab["battles"], ab["wins"], ab["losses"], ab["ties"]) == (4, 2, 1, 1)
    assert ab["win_rate"] == pytest.approx(2 / 3) and ab["score"] == pytest.approx(2.5 / 4)
    ba = table.loc[("B", "A")]
    assert (ba["wins"], ba["losses"], ba["score"]) == (1, 2, pytest.approx(1.5 / 4))
    assert table.loc[("A", "C"), "wins"] == 1 and table.loc[("C", "A"), "losses"] == 1
    assert ("B", "C") not in table.index  # never met
    draws_only = pair_matrix(battles([("A", "B", 2)])).set_index(["model_id", "opponent"])
    assert pd.isna(draws_only.loc[("A", "B"), "win_rate"])


def test_combined_table_and_figures(sample: pd.DataFrame, tmp_path):
    from PIL import Image

    table = preference_ratings(sample, rounds=50, seed=2)
    assert list(table.columns) == list(RATING_COLUMNS)
    for _, part in table.groupby("aspect"):
        assert sorted(part["rank"]) == [1, 2, 3, 4]
        assert part.iloc[0]["elo_median"] == part["elo_median"].max()
    # flux (strongest simulated) outranks sd14 (weakest) in both aspects and both methods
    top = table.set_index(["aspect", "model_id"])
    for aspect in ("bias", "image_quality"):
        assert top.loc[(aspect, "flux"), "bt_rating"] > top.loc[(aspect, "sd14"), "bt_rating"]
    for fig in (rating_intervals(table), win_rate_heatmap(pair_matrix(sample), "bias")):
        rendered = save(fig, "f", "t", "c")
        with Image.open(io.BytesIO(rendered.png)) as im:
            colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
            assert im.size[0] > 300 and colours is not None and len(colours) > 50


@pytest.mark.parametrize(
    ("frame", "kwargs", "match"),
    [
        (pd.DataFrame({"model_a": ["A"], "vote": [0]}), {}, r"lack the column\(s\) model_b"),
        (battles([("A", "A", 0)]), {}, r"'A' against itself"),
        (battles([("A", None, 0)]), {}, r"without model_a, model_b or aspect"),
        (battles([("A", "B", 0)]), {"method": "jackknife"}, r"'jackknife' is not"),
        (battles([("A", "B", 0)]), {"rounds": 0}, r"rounds must be >= 1"),
        (battles([("A", "B", 0)]), {"orders": {"bias": [[0, 1]]}}, r"must index its 1 battles"),
    ],
)
def test_bad_battles(frame, kwargs, match):
    with pytest.raises(RatingError, match=match):
        elo_bootstrap(frame, **kwargs)
