"""The misclassification correction (corpus_audit/methods/misclassification.py): formula,
weights, and a seeded simulation of bias and interval coverage."""

from __future__ import annotations

import numpy as np
import pytest

from corpus_audit.methods import misclassification as mc
from corpus_audit.methods.amplification import Rate, make_pair, summarize
from corpus_audit.methods.stats import bootstrap_percent, percentile_interval

# per source: true share of women; P(female | woman), P(ambiguous | woman);
# P(male | man), P(ambiguous | man)
SOURCES = {
    "training": (0.40, 0.80, 0.08, 0.95, 0.02),
    "model_a": (0.25, 0.90, 0.02, 0.85, 0.10),
}


def _probs(sens: float, u_f: float, spec: float, u_m: float) -> np.ndarray:
    """P(label | gender) as (2, 3): rows woman, man; columns female, male, ambiguous."""
    return np.array([[sens, 1 - sens - u_f, u_f], [1 - spec - u_m, spec, u_m]])


def test_rogan_gladen_without_ambiguous_labels() -> None:
    rates = mc.ErrorRates(0.9, 0.8, 0.0, 0.0)
    # q = p sens + (1 - p)(1 - spec) with p = 0.3: 0.27 + 0.14 = 0.41
    assert mc.corrected_percent(41.0, rates) == pytest.approx(30.0)
    assert mc.corrected_percent(5.0, rates) == 0.0  # clipped
    assert mc.corrected_percent(None, rates) is None
    assert mc.corrected_percent(50.0, mc.ErrorRates(0.5, 0.5, 0.0, 0.0)) is None


def test_ambiguous_labels_are_inverted_exactly() -> None:
    sens, u_f, spec, u_m = 0.8, 0.08, 0.95, 0.02
    probs = _probs(sens, u_f, spec, u_m)
    for p in (0.0, 0.1, 0.4, 0.77, 1.0):
        female = p * probs[0, 0] + (1 - p) * probs[1, 0]
        male = p * probs[0, 1] + (1 - p) * probs[1, 1]
        q = female / (female + male)
        got = mc.corrected_share(q, mc.ErrorRates(sens, spec, u_f, u_m))
        assert float(got) == pytest.approx(p, abs=1e-12)


def test_weights_undo_the_label_stratified_sample() -> None:
    # population: 900 men (860 labelled male, 40 female), 100 women (90 female, 10 male)
    truth = ["male"] * 900 + ["female"] * 100
    pred = ["male"] * 860 + ["female"] * 40 + ["female"] * 90 + ["male"] * 10
    sizes = {"female": 130, "male": 870}
    # the sample: every 'female'-labelled image, 1 in 10 of the 'male'-labelled ones
    keep = [i for i in range(1000) if pred[i] == "female" or i % 10 == 0]
    t = [truth[i] for i in keep]
    p = [pred[i] for i in keep]
    weighted = mc.validation(t, p, p, sizes)
    plain = mc.validation(t, p, ["all"] * len(p))
    r = mc.error_rates(weighted.cells, weighted.weights)
    assert float(r.sensitivity) == pytest.approx(0.9, abs=0.01)
    assert float(r.specificity) == pytest.approx(860 / 900, abs=0.01)
    naive = mc.error_rates(plain.cells, plain.weights)
    assert float(naive.specificity) < 0.7  # what ignoring the strata would claim
    est = {e.name: e for e in mc.rate_estimates(weighted)}
    assert est["sensitivity"].ci_low < 0.9 < est["sensitivity"].ci_high
    assert est["specificity"].n_effective < est["specificity"].n


def test_why_not() -> None:
    empty = mc.pool([])
    assert mc.why_not(empty, 30) == "no validation labels"
    few = mc.validation(["female", "male"], ["female", "male"], ["s", "s"])
    assert mc.why_not(few, 30) == "2 validated images, fewer than 30"
    women = mc.validation(["female"] * 40, ["female"] * 40, ["s"] * 40)
    assert mc.why_not(women, 30) == "no validated men"
    ok = mc.validation(["female", "male"] * 20, ["female", "male"] * 20, ["s"] * 40)
    assert mc.why_not(ok, 30) is None


def _simulate_source(
    rng: np.random.Generator, truth: float, probs: np.ndarray, reps: int, n_measured: int
) -> tuple[np.ndarray, list[mc.Validation]]:
    """``reps`` replicates of one source: the measured %female of ``n_measured`` images, and
    a validation sample stratified by classifier label (80 per label, of 4000 images)."""
    women = rng.binomial(n_measured, truth, size=reps)
    f_w = rng.multinomial(women, probs[0])  # (reps, 3)
    f_m = rng.multinomial(n_measured - women, probs[1])
    counts = f_w + f_m
    measured = 100.0 * counts[:, 0] / (counts[:, 0] + counts[:, 1])
    pop = 4000
    pop_women = rng.binomial(pop, truth, size=reps)
    cells_w = rng.multinomial(pop_women, probs[0])
    cells_m = rng.multinomial(pop - pop_women, probs[1])
    validations = []
    for r in range(reps):
        cells = np.zeros((3, 2, 3), dtype=np.int64)
        weights = np.ones(3)
        for label in range(3):
            stratum = np.array([cells_w[r, label], cells_m[r, label]])
            take = min(80, int(stratum.sum()))
            drawn = rng.multivariate_hypergeometric(stratum, take)
            cells[label, :, label] = drawn
            weights[label] = stratum.sum() / take if take else 1.0
        validations.append(mc.Validation(cells, weights))
    return measured, validations


def test_simulation_unbiased_and_intervals_cover() -> None:
    rng = np.random.default_rng(20260127)
    reps, boot = 400, 1000
    for name, (truth, sens, u_f, spec, u_m) in SOURCES.items():
        probs = _probs(sens, u_f, spec, u_m)
        measured, validations = _simulate_source(rng, truth, probs, reps, 800)
        estimates, covered = [], 0
        for r in range(reps):
            v = validations[r]
            rates = mc.error_rates(v.cells, v.weights)
            estimates.append(mc.corrected_percent(float(measured[r]), rates))
            k = measured[r] * 800 / 100.0  # n is not used by the draw beyond k / n
            q_draws = bootstrap_percent(k, 800, boot, seed=r)
            draws = mc.corrected_draws(q_draws, mc.bootstrap_rates(v, boot, seed=10_000 + r))
            lo, hi = percentile_interval(draws, 0.95)
            covered += lo <= 100 * truth <= hi
        bias = float(np.mean(estimates)) - 100 * truth
        naive_bias = float(np.mean(measured)) - 100 * truth
        assert abs(bias) < 0.6, (name, bias)
        assert abs(naive_bias) > 2.5, (name, naive_bias)  # the correction had work to do
        print(f"{name}: bias {bias:+.3f} pp (naive {naive_bias:+.2f}), coverage {covered / reps}")
        assert 0.93 <= covered / reps <= 0.97, (name, covered / reps)


def test_summarize_uses_given_draws() -> None:
    t, g = Rate("t", 30.0, 100), Rate("g", 20.0, 100)
    pairs = [make_pair("nurse", 1, t, g), make_pair("pilot", 1, Rate("t2", 35.0, 50), g)]
    plain, _ = summarize(pairs, replicates=200, seed=1)
    fixed = {"t": np.full(200, 30.0), "t2": np.full(200, 35.0), "g": np.full(200, 20.0)}
    given, overall = summarize(pairs, replicates=200, seed=1, draws=fixed)
    assert given[0].ci_low == pytest.approx(given[0].mean)
    assert given[0].ci_high == pytest.approx(given[0].mean)
    assert plain[0].ci_high - plain[0].ci_low > 1.0
    # a rate without n gets an interval when its draws are given (g is drawn from its n)
    no_n = [make_pair("nurse", 1, Rate("t", 30.0, None), g)]
    (s,), _ = summarize(no_n, replicates=200, seed=1)
    assert s.ci_low is None
    (s,), _ = summarize(no_n, replicates=200, seed=1, draws={"t": np.full(200, 30.0)})
    assert s.ci_low is not None and s.ci_low < s.mean < s.ci_high


# -- real photos through the real classifier ----------------------------------------------------
def _variants(name: str, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``k`` variants of a real photo: crops, scales, mirror images, brightness."""
    from image_fixtures import photo
    from PIL import Image

    base = photo(name)
    h, w = base.shape[:2]
    out = []
    for i in range(k):
        m = rng.uniform(0.0, 0.12, 4)
        crop = base[int(m[0] * h) : h - int(m[1] * h), int(m[2] * w) : w - int(m[3] * w)]
        im = Image.fromarray(np.ascontiguousarray(crop))
        s = rng.uniform(0.6, 1.0)
        im = im.resize((int(im.width * s), int(im.height * s)))
        if i % 2:
            im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        arr = np.asarray(im).astype(float) * rng.uniform(0.8, 1.15)
        out.append(np.clip(arr, 0, 255).astype(np.uint8))
    return out


def test_real_photos_corrected_closer_to_the_truth() -> None:
    """Variants of the test photos of known gender (astronaut and Grace Hopper: women; the
    cameraman: a man), labelled by the real MediaPipe detector and agegender classifier at
    the label stage's threshold 0.9. It calls Grace Hopper male (tests/backends/
    test_classifiers.py), so it misses women. Half of each photo's variants are validated
    (their known gender as the human labels); a set of the others is measured."""
    from image_fixtures import shared_agegender, shared_detector

    from corpus_audit.backends.classifiers import decide

    rng = np.random.default_rng(7)
    detector, classifier = shared_detector(), shared_agegender()
    labelled: dict[str, list[str]] = {}
    for name in ("astronaut", "grace", "camera"):
        images = _variants(name, 30, rng)
        faces = [detector.detect(im) for im in images]
        assert all(len(f) == 1 for f in faces), name
        p = classifier.p_female(images, [f[0] for f in faces])
        labelled[name] = [decide(float(x), 0.9) for x in p]
    truth = {"astronaut": "female", "grace": "female", "camera": "male"}
    val_truth, val_pred = [], []
    for name, labels in labelled.items():
        val_truth += [truth[name]] * 15
        val_pred += labels[:15]
    v = mc.validation(val_truth, val_pred, ["sample"] * len(val_pred))
    assert mc.why_not(v, 30) is None
    rates = mc.error_rates(v.cells, v.weights)
    assert float(rates.sensitivity) < 0.7  # the real classifier's real misses
    # measured: the other 15 astronaut and 15 Grace Hopper variants, 10 of the cameraman's
    measured = labelled["astronaut"][15:] + labelled["grace"][15:] + labelled["camera"][15:25]
    true_pf = 100.0 * 30 / 40
    n_f, n_m = measured.count("female"), measured.count("male")
    uncorrected = 100.0 * n_f / (n_f + n_m)
    corrected = mc.corrected_percent(uncorrected, rates)
    assert corrected is not None
    print(f"true {true_pf:.1f}, uncorrected {uncorrected:.1f}, corrected {corrected:.1f}")
    assert abs(corrected - true_pf) < abs(uncorrected - true_pf)
    q_draws = bootstrap_percent(n_f, n_f + n_m, 2000, seed=1)
    draws = mc.corrected_draws(q_draws, mc.bootstrap_rates(v, 2000, seed=2))
    lo, hi = percentile_interval(draws, 0.95)
    assert lo <= true_pf <= hi


def test_the_worked_example_of_docs_analysis() -> None:
    """docs/analysis.md, "Correcting for the classifier's errors": the sign of A flips."""
    photos = mc.ErrorRates(0.95, 0.95, 0.0, 0.0)
    generated = mc.ErrorRates(0.80, 0.95, 0.08, 0.02)
    t_q = 0.35 * 0.95 + 0.65 * 0.05
    g_q = (0.38 * 0.80 + 0.62 * 0.03) / (0.38 * 0.92 + 0.62 * 0.98)
    assert (100 * t_q, 100 * g_q) == (pytest.approx(36.5), pytest.approx(33.70, abs=0.01))
    t, g = mc.corrected_percent(100 * t_q, photos), mc.corrected_percent(100 * g_q, generated)
    assert (t, g) == (pytest.approx(35.0), pytest.approx(38.0))
    assert abs(100 * g_q - 50) - abs(100 * t_q - 50) == pytest.approx(2.8, abs=0.05)
    assert abs(g - 50) - abs(t - 50) == pytest.approx(-3.0)
