"""Issue 23, item 4: the counts a user sets are bounded where they are read.

``battles import --rounds 100000000`` grew to 23.7 GB and was killed by the kernel;
``analysis.bootstrap = 1000000000`` was accepted and ``pst_analyze`` then allocated 7.45 GiB
per array. Each count now has a documented maximum (docs/reliability.md), Elo's random orders
are drawn in blocks, and a ``MemoryError`` is one line.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

from corpus_audit.cli import main
from corpus_audit.core.config import MAX_RESAMPLES, MAX_THREADS, ConfigError, config_from_dict
from corpus_audit.methods.preferences import elo


@pytest.mark.parametrize(
    ("section", "key", "value", "maximum"),
    [
        ("analysis", "bootstrap", 1_000_000_000, MAX_RESAMPLES),
        ("variants", "replicates", 10**9, MAX_RESAMPLES),
        ("engine", "threads", 100_000, MAX_THREADS),
    ],
)
def test_counts_above_their_maximum_are_refused_naming_the_key(
    tmp_path, section, key, value, maximum
):
    with pytest.raises(ConfigError, match=rf"{section}\.{key}: {value} is above the maximum"):
        config_from_dict({section: {key: value}}, tmp_path)
    config_from_dict({section: {key: maximum}}, tmp_path)  # the maximum itself is fine


def test_battles_import_rounds_above_the_maximum_is_one_line(tmp_path, laion_path, capsys):
    root = tmp_path / "s"
    assert main(["-q", "init", str(root), "--corpus", str(laion_path), "--sample-size", "5"]) == 0
    votes = tmp_path / "votes.csv"
    votes.write_text("pair_id,aspect,vote\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["battles", "import", str(root), str(votes), "--rounds", "100000000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert f"--rounds 100000000 is above the maximum {MAX_RESAMPLES:,}" in err


def _battles(n: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    models = np.array(["m0", "m1", "m2"])
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    return pd.DataFrame(
        {
            "aspect": "realism",
            "model_a": models[a],
            "model_b": models[b],
            "vote": rng.choice([0, 1, 2], n),
        }
    )


@pytest.mark.parametrize("method", ["shuffle", "resample"])
def test_elo_orders_drawn_in_blocks_give_the_same_intervals(monkeypatch, method):
    battles = _battles(300)
    whole = elo.elo_bootstrap(battles, rounds=200, seed=3, method=method)
    monkeypatch.setattr(elo, "_BLOCK_CELLS", 300 * 7)  # blocks of 7 rounds
    blocked = elo.elo_bootstrap(battles, rounds=200, seed=3, method=method)
    if method == "shuffle":  # the generator is consumed row by row: the same orders
        pd.testing.assert_frame_equal(whole, blocked)
    else:  # same distribution, other draws once split; the intervals stay close
        assert (blocked["rounds"] == 200).all()
        assert np.allclose(whole["elo_median"], blocked["elo_median"], atol=25)


def test_elo_memory_does_not_grow_with_the_rounds(monkeypatch):
    """100,000 rounds of 400 battles: 320 MB of orders if drawn at once; in blocks the peak
    is one block (32 MiB) plus the ratings (rounds x models)."""
    battles = _battles(400)
    tracemalloc.start()
    try:
        out = elo.elo_bootstrap(battles, rounds=100_000, seed=0, method="resample")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (out["rounds"] == 100_000).all()
    assert peak < 120 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_memory_error_is_one_line(tmp_path, laion_path, capsys, monkeypatch):
    from corpus_audit.commands.verbs import status

    root = tmp_path / "s"
    assert main(["-q", "init", str(root), "--corpus", str(laion_path), "--sample-size", "5"]) == 0

    def exhausted(args):
        raise MemoryError("Unable to allocate 7.45 GiB for an array with shape (1000000000,)")

    monkeypatch.setattr(status, "run", exhausted)
    capsys.readouterr()
    assert main(["status", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("error: status: out of memory (Unable to allocate 7.45 GiB")


def test_pst_prompts_above_the_maximum_are_refused_with_the_number(monkeypatch):
    from corpus_audit.methods.lexicon import LexiconError, pst

    for power_singles in ("role", "occupation_role"):
        for fair in (True, False):
            monkeypatch.setattr(pst, "MAX_PROMPTS", 10**9)
            n = len(pst.load_prompts(power_singles=power_singles, fair=fair))
            monkeypatch.setattr(pst, "MAX_PROMPTS", n)  # the count is exact: n is allowed
            assert len(pst.load_prompts(power_singles=power_singles, fair=fair)) == n
            monkeypatch.setattr(pst, "MAX_PROMPTS", n - 1)
            with pytest.raises(LexiconError, match=rf"expand to {n:,} prompts, above the maximum"):
                pst.load_prompts(power_singles=power_singles, fair=fair)
