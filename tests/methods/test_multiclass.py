"""K-class correction and amplification: exactness at K = 2, and simulations of bias and
coverage (corpus_audit.methods.multiclass)."""

from __future__ import annotations

import numpy as np
import pytest

from corpus_audit.methods import misclassification as mc
from corpus_audit.methods import multiclass as mk
from corpus_audit.methods.amplification import amplification


def _rates(rng: np.random.Generator) -> tuple[mc.ErrorRates, np.ndarray]:
    """Random valid binary error rates (with ambiguous shares) and their 2 x 3 matrix."""
    sens, u_f = rng.uniform(0.6, 0.95), rng.uniform(0.0, 0.1)
    spec, u_m = rng.uniform(0.6, 0.95), rng.uniform(0.0, 0.1)
    sens, spec = min(sens, 1 - u_f), min(spec, 1 - u_m)
    matrix = np.array([[sens, 1 - sens - u_f, u_f], [1 - spec - u_m, spec, u_m]])
    return mc.ErrorRates(sens, spec, u_f, u_m), matrix


def test_k2_correction_equals_the_binary_formula():
    rng = np.random.default_rng(1)
    for _ in range(300):
        rates, matrix = _rates(rng)
        q = rng.uniform(0, 1)
        expected = float(mc.corrected_share(q, rates))
        got = mk.corrected_shares(np.array([q, 1 - q]), matrix)
        assert got[0] == pytest.approx(expected, abs=1e-6)
        assert got.sum() == pytest.approx(1.0)


def test_a_k_at_k2_is_the_binary_amplification():
    rng = np.random.default_rng(2)
    for _ in range(100):
        t, g = rng.uniform(0, 1, 2)
        a_k = mk.tv_uniform(np.array([g, 1 - g])) - mk.tv_uniform(np.array([t, 1 - t]))
        assert 100 * a_k == pytest.approx(amplification(100 * t, 100 * g), abs=1e-9)


def test_correction_is_unbiased_with_nominal_coverage_over_simulations():
    """Five classes, a noisy instrument, a validation sample: the corrected shares are
    unbiased and the bootstrap interval of class 0 covers the truth 93-97 % of the time."""
    rng = np.random.default_rng(3)
    truth = np.array([0.35, 0.25, 0.2, 0.12, 0.08])
    k = truth.size
    matrix = 0.8 * np.eye(k) + 0.2 / k  # 84 % right, errors spread evenly
    estimates, covered, sims = [], 0, 300
    for _ in range(sims):
        items = rng.choice(k, 2000, p=truth)
        pred = (rng.random((items.size, 1)) < matrix[items].cumsum(axis=1)).argmax(axis=1)
        q = np.bincount(pred, minlength=k) / pred.size
        val_truth = rng.choice(k, 400)
        val_pred = (rng.random((400, 1)) < matrix[val_truth].cumsum(axis=1)).argmax(axis=1)
        m_hat = mk.confusion(val_truth, val_pred, k, k)
        estimates.append(mk.corrected_shares(q, m_hat))
        reps = 150
        q_draws = rng.multinomial(pred.size, q, size=reps) / pred.size
        m_draws = mk.bootstrap_confusion(val_truth, val_pred, [0] * 400, k, k, None, reps, rng)
        draws = mk.corrected_draws(q_draws, m_draws)[:, 0]
        lo, hi = np.nanquantile(draws, [0.025, 0.975])
        covered += lo <= truth[0] <= hi
    bias = np.mean(estimates, axis=0) - truth
    assert np.abs(bias).max() < 0.006
    assert 0.93 <= covered / sims <= 0.97  # 0.943 with this seed


def test_equal_n_removes_the_small_sample_bias_of_a_k():
    """Same distribution, 600 training vs 80 generated items: the raw A_K is positive from
    sample size alone; at equal n it is 0 on average and its interval covers 0."""
    rng = np.random.default_rng(4)
    p = np.full(10, 0.1)
    raws, points, covers = [], [], 0
    for _ in range(200):
        a = mk.amplification_k(rng.multinomial(600, p), rng.multinomial(80, p), 300, rng)
        raws.append(a.raw)
        points.append(a.equal_n)
        covers += a.low <= 0 <= a.high
    assert np.mean(raws) > 0.05
    assert abs(np.mean(points)) < 0.01
    assert covers / 200 >= 0.9


def test_uniform_generator_tv_at_n100_and_its_excess():
    rng = np.random.default_rng(5)
    p = np.full(10, 0.1)
    samples = rng.multinomial(100, p, size=400) / 100
    raw = mk.tv_uniform(samples)
    assert raw.mean() == pytest.approx(0.12, abs=0.015)
    excess = [mk.tv_excess(s, 100, rng) for s in samples[:100]]
    assert abs(np.mean(excess)) < 0.01


def test_directional_amplification_by_hand():
    train = np.array([[80, 20], [30, 70]])  # occupation 0 leans to class 0, 1 to class 1
    same = mk.directional_amplification(train, train)
    assert same == pytest.approx(0.0)
    stronger = np.array([[95, 5], [10, 90]])
    weaker = np.array([[60, 40], [45, 55]])
    assert mk.directional_amplification(train, stronger) == pytest.approx(
        (0.15 + 0.15 + 0.20 + 0.20) / 4
    )
    assert mk.directional_amplification(train, weaker) < 0


def test_emd_entropy_and_bh():
    assert mk.emd_ordinal(np.array([1, 0, 0]), np.array([0, 0, 1])) == pytest.approx(2.0)
    h, h_mm = mk.normalised_entropy(np.array([50, 50]))
    assert h == pytest.approx(1.0) and h_mm == 1.0
    h, h_mm = mk.normalised_entropy(np.array([10, 5, 0, 0]))
    assert 0 < h < h_mm < 1
    q = mk.benjamini_hochberg([0.01, 0.04, 0.03, np.nan, 0.5])
    assert q[0] == pytest.approx(0.04) and q[1] == q[2] == pytest.approx(0.04 * 4 / 3)
    assert np.isnan(q[3]) and q[4] == pytest.approx(0.5)


def test_joint_matrix_and_independence_test():
    a = np.array([[0.9, 0.1], [0.2, 0.8]])
    b = np.eye(3)
    joint = mk.joint_matrix(a, b)
    assert joint.shape == (6, 6) and np.allclose(joint.sum(axis=1), 1)
    rng = np.random.default_rng(6)
    wa, wb = rng.random(500) < 0.2, rng.random(500) < 0.3
    assert mk.error_independence_p(wa, wb) > 0.001
    assert mk.error_independence_p(wa, wa) < 1e-6


def test_bad_input_is_refused_or_nan():
    with pytest.raises(ValueError, match="out of range"):
        mk.confusion([0, 3], [0, 1], 2, 2)
    m = mk.confusion([0, 0], [0, 1], 2, 2)  # no validated item of class 1
    assert np.isnan(m[1]).all()
    assert np.isnan(mk.corrected_shares(np.array([0.5, 0.5]), m)).all()
    assert np.isnan(mk.amplification_k(np.zeros(3), np.ones(3), 10, np.random.default_rng()).raw)


def test_a_k_at_k2_equals_a_on_the_demos_published_tables():
    """The demo's data: the paper's published %female per occupation (training, and four
    prompts of SD 1.4 and SD 1.5, 500 labelled images each). A_K of the two-class counts
    equals the amplification `corpus-audit amplify` computes from the same table."""
    import csv
    from importlib import resources

    published = resources.files("corpus_audit").joinpath("demo_data", "published")
    checked = 0
    for name in ("percent_female_sd14.tsv", "percent_female_sd15.tsv"):
        rows = list(csv.DictReader(published.joinpath(name).open(), delimiter="\t"))
        for row in rows:
            t = float(row["training"])
            for prompt in ("prompt1", "prompt2", "prompt3", "prompt4"):
                if not row.get(prompt):
                    continue
                g = float(row[prompt])
                t_counts = np.array([t * 5, 500 - t * 5])  # 500 images: 0.2 % per image
                g_counts = np.array([g * 5, 500 - g * 5])
                got = mk.amplification_k(t_counts, g_counts, 10, np.random.default_rng(0))
                assert 100 * got.raw == pytest.approx(amplification(t, g), abs=1e-9)
                checked += 1
    assert checked > 400
