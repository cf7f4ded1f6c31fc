"""corpus_audit.methods.preferences.leaderboard on its own: chunked rounds, interval ranks, bounds,
and the pure modules stay free of the study database."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from corpus_audit.methods.preferences import leaderboard as lb


def _votes(n: int = 120, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    models = ["m1", "m2", "m3"]
    rows = []
    for i in range(n):
        a, b = rng.choice(3, size=2, replace=False)
        rows.append(
            {
                "aspect": "bias",
                "language": "en" if i % 2 else "de",
                "model_a": models[a],
                "model_b": models[b],
                "vote": int(rng.choice([0, 0, 1, 2, 3]) if a < b else rng.choice([1, 1, 0, 2])),
            }
        )
    return pd.DataFrame(rows)


def test_rounds_run_in_chunks_and_are_reproducible():
    votes = _votes()
    rounds = 2 * lb.CHUNK + 7
    first = lb.leaderboard(votes, rounds=rounds, seed=11)
    again = lb.leaderboard(votes, rounds=rounds, seed=11)
    pd.testing.assert_frame_equal(first, again)
    assert set(first["rounds"]) == {rounds}
    assert list(first["language"].drop_duplicates()) == ["all", "de", "en"]
    other = lb.leaderboard(votes, rounds=rounds, seed=12)
    assert not np.allclose(first["elo_ci_low"], other["elo_ci_low"])
    # the point estimates do not depend on the seed
    assert np.allclose(first["elo"], other["elo"]) and np.allclose(
        first["bt_rating"], other["bt_rating"]
    )


def test_chunked_replicates_have_the_asked_shape():
    a, b = np.array([0, 1, 2, 0]), np.array([1, 2, 0, 2])
    s = np.array([1.0, 0.5, 0.0, 1.0])
    rng = np.random.default_rng(0)
    assert lb.elo_shuffled(a, b, s, 3, lb.CHUNK + 1, rng).shape == (lb.CHUNK + 1, 3)
    theta, boot = lb.bt_bootstrap(a, b, s, 3, lb.CHUNK + 1, rng)
    assert theta.shape == (3,) and boot.shape == (lb.CHUNK + 1, 3)
    assert np.allclose(boot.mean(axis=1), 0.0)


def test_interval_ranks():
    low = np.array([10.0, 5.0, 0.0, -20.0])
    high = np.array([20.0, 12.0, 8.0, -1.0])
    # model 0 lies above model 3 only; model 2 below model 0 (10 > 8); 3 below all
    assert lb.interval_ranks(low, high).tolist() == [1, 1, 2, 4]


@pytest.mark.parametrize("rounds", [0, lb.MAX_ROUNDS + 1, 2.5, True])
def test_rounds_are_bounded(rounds):
    with pytest.raises(lb.LeaderboardError, match="rounds must be a whole number"):
        lb.leaderboard(_votes(), rounds=rounds)


def test_pure_modules_do_not_load_the_study_database():
    code = (
        "import sys; import corpus_audit.methods.preferences.leaderboard, "
        "corpus_audit.methods.preferences.arena_import, corpus_audit.methods.lexicon.german_stats; "
        "print(sorted(m for m in ('duckdb', 'corpus_audit.core.store') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
