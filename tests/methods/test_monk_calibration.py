"""Monk calibration: a known ordinal model's labels are recovered; too few labels are refused."""

from __future__ import annotations

import numpy as np
import pytest

from corpus_audit.methods.monk_calibration import CalibrationRefused, fit

TRUE_CUTS = np.array([-6.0, -4.5, -3.0, -1.5, 0.0, 1.5, 3.0, 4.5, 6.0])
TRUE_BETA = np.array([-3.0, 0.6])  # per standard deviation of L* and hue: lighter -> lower tone


def simulate(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    l_star = rng.uniform(15, 95, n)
    hue = rng.normal(60, 10, n)
    z = np.column_stack([(l_star - 55) / 23.1, (hue - 60) / 10])
    eta = z @ TRUE_BETA + rng.logistic(size=n)
    monk = 1 + np.searchsorted(TRUE_CUTS, eta)
    return l_star, hue, monk.astype(float)


def true_probs(l_star: np.ndarray, hue: np.ndarray) -> np.ndarray:
    z = np.column_stack([(l_star - 55) / 23.1, (hue - 60) / 10])
    cum = 1 / (1 + np.exp(-(TRUE_CUTS[None, :] - (z @ TRUE_BETA)[:, None])))
    return np.diff(np.column_stack([np.zeros(len(z)), cum, np.ones(len(z))]), axis=1)


@pytest.fixture(scope="module")
def fitted():
    l_star, hue, monk = simulate(3000)
    return fit(l_star, hue, monk), (l_star, hue, monk)


def test_known_model_is_recovered(fitted):
    model, (l_star, hue, _monk) = fitted
    # coefficients per standard deviation of the fitted sample: rescale the truth to it
    truth = TRUE_BETA * np.array([l_star.std() / 23.1, hue.std() / 10])
    assert np.allclose(model.beta, truth, rtol=0.12)
    assert model.low == 1 and model.high == 10 and model.n == 3000
    assert np.all(np.diff(model.cuts) > 0)
    probs = model.predict_proba(l_star[:200], hue[:200])
    assert probs.shape == (200, 10) and np.allclose(probs.sum(axis=1), 1.0)


def test_predictions_follow_lightness_and_are_deterministic(fitted):
    model, (l_star, hue, monk) = fitted
    light, dark = model.predict(np.array([95.0, 15.0]), np.array([60.0, 60.0]))
    assert light <= 2 and dark >= 9
    # the fitted probabilities match the true model's on a grid of L* and hue
    grid_l, grid_h = np.meshgrid(np.linspace(20, 90, 8), np.linspace(45, 75, 4))
    grid_l, grid_h = grid_l.ravel(), grid_h.ravel()
    assert np.abs(model.predict_proba(grid_l, grid_h) - true_probs(grid_l, grid_h)).max() < 0.06
    # fresh data from the same model: predictions as good as the true model's own
    l2, h2, m2 = simulate(2000, seed=11)
    oracle = np.argmax(true_probs(l2, h2), axis=1) + 1
    assert np.mean(model.predict(l2, h2) == m2) >= np.mean(oracle == m2) - 0.02
    again = fit(l_star, hue, monk)
    assert again == model


def test_missing_tones_get_no_probability():
    l_star, hue, monk = simulate(600)
    keep = (monk >= 3) & (monk <= 8)
    model = fit(l_star[keep], hue[keep], monk[keep])
    probs = model.predict_proba(np.array([95.0, 10.0]), np.array([60.0, 60.0]))
    assert (model.low, model.high) == (3, 8)
    assert np.all(probs[:, :2] == 0) and np.all(probs[:, 8:] == 0)


def test_too_few_labels_are_refused():
    l_star, hue, monk = simulate(40)
    with pytest.raises(CalibrationRefused, match="29 Monk labels; at least 30"):
        fit(l_star[:29], hue[:29], monk[:29])
    # can't-tell (NaN) labels do not count
    monk_nan = monk.copy()
    monk_nan[:15] = np.nan
    with pytest.raises(CalibrationRefused, match="25 Monk labels"):
        fit(l_star, hue, monk_nan)


def test_too_few_tones_are_refused():
    l_star, hue, _ = simulate(100)
    monk = np.where(l_star > 55, 3.0, 7.0)
    with pytest.raises(CalibrationRefused, match="2 distinct Monk tones; at least 3"):
        fit(l_star, hue, monk)


def test_bad_labels_are_refused():
    l_star, hue, monk = simulate(50)
    monk[0] = 11
    with pytest.raises(ValueError, match="whole numbers 1-10"):
        fit(l_star, hue, monk)
    with pytest.raises(ValueError, match="differ in length"):
        fit(l_star[:10], hue, monk)
