"""Caption variants compared (corpus_audit.methods.recaption.compare): a hand-worked example, the real
COCO captions (caption 1 vs caption 2 of each image, real indicator rules and occupation
matcher) checked against counts made here with plain loops, the paired bootstrap against a
plain resampling loop, McNemar's exact test against the binomial sum, and bad input."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest

from corpus_audit.methods.recaption.compare import (
    CHANGE_COLUMNS,
    DIFFERENCE_COLUMNS,
    EXAMPLE_COLUMNS,
    FLIP_COLUMNS,
    MENTION_COLUMNS,
    RATE_COLUMNS,
    SIMILARITY_COLUMNS,
    TRANSITION_COLUMNS,
    PairedBootstrap,
    compare_variants,
    image_changes,
    indicator_rates,
    mention_changes,
    mention_flips,
    paired_differences,
    similarity_summary,
    transition_examples,
    transitions,
)

LABELS = ("male", "female", "both", "none")


# -- a hand-worked example -------------------------------------------------------------------------
def hand_example() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Six images; image 6 has no blip caption (unpaired). Labels given by hand."""
    rows = [
        (1, "orig", "A doctor and his patient", "male"),
        (1, "blip", "a woman in a white coat", "female"),
        (2, "orig", "a nurse smiling", "none"),
        (2, "blip", "a nurse and her child", "female"),
        (3, "orig", "a man cooking", "male"),
        (3, "blip", "a chef at work", "none"),
        (4, "orig", "two dogs", "none"),
        (4, "blip", "two dogs on grass", "none"),
        (5, "orig", "a doctor", "none"),
        (5, "blip", "a doctor with her bag", "female"),
        (6, "orig", "a woman doctor", "female"),
    ]
    captions = pd.DataFrame(rows, columns=["image_key", "variant", "caption", "label"])
    mentions = pd.DataFrame(
        [
            (1, "orig", "doctor"),
            (2, "orig", "nurse"),
            (2, "blip", "nurse"),
            (3, "blip", "chef"),
            (5, "orig", "doctor"),
            (5, "blip", "doctor"),
            (5, "blip", "doctor"),  # a duplicate row counts once
            (6, "orig", "doctor"),
        ],
        columns=["image_key", "variant", "occupation"],
    )
    return captions, mentions


def row(frame: pd.DataFrame, **where) -> pd.Series:
    mask = np.ones(len(frame), bool)
    for col, value in where.items():
        mask &= frame[col].isna().to_numpy() if value is None else (frame[col] == value).to_numpy()
    picked = frame[mask]
    assert len(picked) == 1, (where, picked)
    return picked.iloc[0]


def test_hand_example_indicator_rates():
    captions, mentions = hand_example()
    rates = indicator_rates(captions, mentions, variants=["orig", "blip"])
    assert tuple(rates.columns) == RATE_COLUMNS
    r = row(rates, variant="orig", occupation=None)  # six captions: male 2, female 1, none 3
    assert (r.n_captions, r.n_male_only, r.n_female_only, r.n_both, r.n_none) == (6, 2, 1, 0, 3)
    assert r.pct_any == pytest.approx(50.0)
    r = row(rates, variant="orig", occupation="doctor")  # images 1, 5, 6: male, none, female
    assert (r.n_captions, r.n_male_only, r.n_female_only, r.n_none) == (3, 1, 1, 1)
    assert r.pct_any == pytest.approx(200 / 3)
    assert 0 < r.any_ci_low < r.pct_any < r.any_ci_high < 100
    r = row(rates, variant="blip", occupation=None)
    assert (r.n_captions, r.n_female_only, r.n_none) == (5, 3, 2)
    r = row(rates, variant="blip", occupation="chef")
    assert (r.n_captions, r.n_none, r.pct_any) == (1, 1, 0.0)
    r = row(rates, variant="orig", occupation="chef")  # nothing: counts 0, percentages NULL
    assert r.n_captions == 0 and pd.isna(r.pct_any) and pd.isna(r.any_ci_low)
    assert list(rates["variant"].iloc[:4]) == ["orig"] * 4  # orig block first, as asked


def test_hand_example_mentions():
    captions, mentions = hand_example()
    table = mention_changes(captions, mentions, "orig", "blip")
    assert tuple(table.columns) == MENTION_COLUMNS
    r = row(table, occupation=None)  # paired images 1-5: a {1,2,5}, b {2,3,5}
    assert (r.n_a, r.n_b, r.n_kept, r.n_gained, r.n_lost) == (3, 3, 2, 1, 1)
    assert r.pct_kept == pytest.approx(200 / 3)
    r = row(table, occupation="doctor")  # image 6 is unpaired, so not here
    assert (r.n_a, r.n_b, r.n_kept, r.n_gained, r.n_lost, r.pct_kept) == (2, 1, 1, 0, 1, 50.0)
    r = row(table, occupation="chef")
    assert (r.n_a, r.n_b, r.n_gained) == (0, 1, 1) and pd.isna(r.pct_kept)
    flips = mention_flips(captions, mentions, "orig", "blip")
    assert tuple(flips.columns) == FLIP_COLUMNS
    assert flips[["occupation", "image_key", "change"]].values.tolist() == [
        ["chef", 3, "gained"],
        ["doctor", 1, "lost"],
    ]
    assert flips.iloc[1].caption_b == "a woman in a white coat"


def test_hand_example_transitions_and_changes():
    captions, mentions = hand_example()
    changes = image_changes(captions, mentions, "orig", "blip")
    assert tuple(changes.columns) == CHANGE_COLUMNS
    assert changes["image_key"].tolist() == [1, 2, 3, 4, 5]
    assert changes["transition"].tolist() == [
        "male->female", "none->female", "male->none", "none->none", "none->female",
    ]  # fmt: skip
    assert changes["changed"].tolist() == [True, True, True, False, True]
    assert changes["occupations_a"].tolist() == ["doctor", "nurse", "", "", "doctor"]
    assert changes["occupations_b"].tolist() == ["", "nurse", "chef", "", "doctor"]

    table = transitions(captions, mentions, "orig", "blip", examples=1)
    assert tuple(table.columns) == TRANSITION_COLUMNS
    assert len(table) == 16 * 4  # all images + chef, doctor, nurse; 16 cells each
    everything = table[table["occupation"].isna()]
    counts = {t: n for t, n in zip(everything.transition, everything.n_images, strict=True) if n}
    assert counts == {"none->female": 2, "male->female": 1, "male->none": 1, "none->none": 1}
    assert row(everything, transition="none->female").pct_images == pytest.approx(40.0)
    assert row(everything, transition="none->female").example_keys == [2]  # first key only
    doctor = table[table["occupation"] == "doctor"]  # union: images 1 and 5
    assert row(doctor, transition="male->female").n_images == 1
    assert row(doctor, transition="none->female").pct_images == pytest.approx(50.0)
    assert doctor["n_images"].sum() == 2
    only_a = transitions(captions, mentions, "orig", "blip", basis="both")
    assert only_a[only_a["occupation"] == "doctor"]["n_images"].sum() == 1  # image 5

    examples = transition_examples(transitions(captions, mentions, "orig", "blip"), captions)
    assert tuple(examples.columns) == EXAMPLE_COLUMNS
    doc = examples[examples["occupation"] == "doctor"]
    assert doc[["transition", "image_key"]].values.tolist() == [
        ["male->female", 1],
        ["none->female", 5],
    ]
    assert doc.iloc[0].caption_a == "A doctor and his patient"


def test_hand_example_paired_differences():
    captions, mentions = hand_example()
    diffs = paired_differences(
        captions, mentions, "orig", "blip", bootstrap=PairedBootstrap(replicates=200)
    )
    assert tuple(diffs.columns) == DIFFERENCE_COLUMNS
    r = row(diffs, occupation=None, metric="any_indicator")  # a 1,0,1,0,0  b 1,1,0,0,1
    assert (r.n_images, r.value_a, r.value_b, r.difference) == (5, 40.0, 60.0, 20.0)
    assert (r.n_a_only, r.n_b_only) == (1, 2)
    assert r.p_value == pytest.approx(1.0)  # 2 x P(X >= 2), X ~ Bin(3, 1/2) = 2 x 4/8
    r = row(diffs, occupation=None, metric="female_indicator")
    assert (r.value_a, r.value_b, r.n_b_only) == (0.0, 60.0, 3)
    assert r.p_value == pytest.approx(0.25)  # 2 x (1/2)^3
    assert r.ci_low <= 60.0 <= r.ci_high
    r = row(diffs, occupation=None, metric="mentions")
    assert (r.value_a, r.value_b, r.n_a_only, r.n_b_only) == (60.0, 60.0, 1, 1)
    r = row(diffs, occupation="doctor", metric="female_indicator")  # images 1, 5
    assert (r.n_images, r.value_a, r.value_b) == (2, 0.0, 100.0)
    r = row(diffs, occupation="doctor", metric="mentions")
    assert (r.value_a, r.value_b) == (100.0, 50.0)
    r = row(diffs, occupation=None, metric="both")  # no discordant image: p = 1, interval 0
    assert (r.p_value, r.ci_low, r.ci_high) == (1.0, 0.0, 0.0)
    assert set(diffs["test"]) == {"mcnemar_exact"}
    no_ci = paired_differences(
        captions, mentions, "orig", "blip", bootstrap=PairedBootstrap(replicates=0)
    )
    assert no_ci["ci_low"].isna().all()


def test_similarity_summary_and_difference_by_hand():
    captions, mentions = hand_example()
    sims = pd.DataFrame(
        [  # image, variant, occupation, similarity (two prompts for image 1 in orig)
            (1, "orig", "doctor", 0.2),
            (1, "orig", "doctor", 0.4),
            (1, "blip", "doctor", 0.5),
            (5, "orig", "doctor", 0.6),
            (5, "blip", "doctor", 0.9),
            (2, "orig", "nurse", 0.1),  # no blip value: left out of the paired difference
        ],
        columns=["image_key", "variant", "occupation", "similarity"],
    )
    summary = similarity_summary(sims, variants=["orig", "blip"])
    assert tuple(summary.columns) == SIMILARITY_COLUMNS
    r = row(summary, variant="orig", occupation="doctor")
    assert (r.n_pairs, r.n_images) == (3, 2)
    assert r.mean_similarity == pytest.approx(0.4)
    assert r.q50 == pytest.approx(0.4) and r.std_similarity == pytest.approx(0.2)
    assert r.q25 == pytest.approx(0.3) and r.q75 == pytest.approx(0.5)  # linear interpolation
    r = row(summary, variant="orig", occupation=None)
    assert r.n_pairs == 4 and r.mean_similarity == pytest.approx(1.3 / 4)
    r = row(summary, variant="blip", occupation="nurse")
    assert r.n_pairs == 0 and pd.isna(r.mean_similarity)

    diffs = paired_differences(
        captions, mentions, "orig", "blip", similarities=sims, bootstrap=PairedBootstrap(200)
    )
    r = row(diffs, occupation="doctor", metric="mean_similarity")
    # image 1: orig mean 0.3 -> 0.5; image 5: 0.6 -> 0.9
    assert (r.n_images, r.unit, r.test) == (2, "cosine", "paired_t")
    assert r.value_a == pytest.approx(0.45) and r.value_b == pytest.approx(0.7)
    assert r.difference == pytest.approx(0.25)
    assert 0.2 - 1e-9 <= r.ci_low <= r.ci_high <= 0.3 + 1e-9  # resampled means of 0.2 and 0.3
    assert pd.isna(r.n_a_only)
    from scipy.stats import ttest_rel

    assert r.p_value == pytest.approx(ttest_rel([0.5, 0.9], [0.3, 0.6]).pvalue)
    r = row(diffs, occupation="nurse", metric="mean_similarity")
    assert r.n_images == 0 and pd.isna(r.difference)


def test_compare_variants_collects_every_table():
    captions, mentions = hand_example()
    result = compare_variants(
        captions, mentions, "orig", "blip", bootstrap=PairedBootstrap(replicates=50)
    )
    assert set(result.tables()) == {
        "indicator_rates", "mention_changes", "mention_flips", "image_changes",
        "transitions", "transition_examples", "differences",
    }  # fmt: skip
    assert result.similarity is None
    again = compare_variants(
        captions, mentions, "orig", "blip", bootstrap=PairedBootstrap(replicates=50)
    )
    pd.testing.assert_frame_equal(result.differences, again.differences)  # seeded


# -- bad input -------------------------------------------------------------------------------------
def test_bad_input_is_a_clear_error():
    captions, mentions = hand_example()
    with pytest.raises(ValueError, match="captions: missing column\\(s\\) label"):
        indicator_rates(captions.drop(columns="label"), mentions)
    with pytest.raises(ValueError, match="mentions: missing column\\(s\\) occupation"):
        indicator_rates(captions, mentions.drop(columns="occupation"))
    bad = captions.copy()
    bad.loc[0, "label"] = "woman"
    with pytest.raises(ValueError, match="label must be one of .*'woman'"):
        transitions(bad, mentions, "orig", "blip")
    twice = pd.concat([captions, captions.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError, match="image 1 has two captions of variant 'orig'"):
        transitions(twice, mentions, "orig", "blip")
    orphan = pd.concat([mentions, pd.DataFrame([(99, "orig", "nurse")], columns=mentions.columns)])
    with pytest.raises(ValueError, match="not in captions .*image_key 99"):
        mention_changes(captions, orphan, "orig", "blip")
    as_text = mentions.assign(image_key=mentions["image_key"].astype(str))
    with pytest.raises(ValueError, match="same key type"):
        mention_changes(captions, as_text, "orig", "blip")
    with pytest.raises(ValueError, match="'llava' has no captions \\(known: blip, orig\\)"):
        transitions(captions, mentions, "orig", "llava")
    with pytest.raises(ValueError, match="two different variants"):
        transitions(captions, mentions, "orig", "orig")
    with pytest.raises(ValueError, match="basis: 'all'"):
        transitions(captions, mentions, "orig", "blip", basis="all")
    nulls = captions.copy()
    nulls.loc[0, "variant"] = None
    with pytest.raises(ValueError, match="must not be NULL"):
        indicator_rates(nulls, mentions.iloc[1:])
    with pytest.raises(ValueError, match="cosine in \\[-1, 1\\]"):
        similarity_summary(
            pd.DataFrame(
                {"image_key": [1], "variant": ["a"], "occupation": ["x"], "similarity": [1.5]}
            )
        )


def test_empty_and_null_text_inputs():
    captions, mentions = hand_example()
    captions.loc[captions["image_key"] == 4, "caption"] = None  # a NULL text is just no text
    empty_mentions = mentions.iloc[0:0]
    result = compare_variants(
        captions, empty_mentions, "orig", "blip", bootstrap=PairedBootstrap(replicates=20)
    )
    assert len(result.mention_flips) == 0
    assert result.mention_changes["occupation"].isna().all()  # only the "any" row
    assert len(result.transitions) == 16
    assert set(result.differences["occupation"].isna()) == {True}
    with_named = indicator_rates(captions, empty_mentions, occupations=["nurse"])
    assert row(with_named, variant="orig", occupation="nurse").n_captions == 0


# -- the paired bootstrap and McNemar's test ------------------------------------------------------
def test_multinomial_bootstrap_matches_plain_resampling():
    """The vectorised multinomial draw has the distribution of resampling images with
    replacement: its interval agrees with a plain index-resampling loop and with the normal
    approximation of a paired difference of proportions."""
    rng = np.random.default_rng(7)
    n = 3000
    a = rng.random(n) < 0.30
    b = np.where(rng.random(n) < 0.8, a, rng.random(n) < 0.45)  # correlated with a
    boot = PairedBootstrap(replicates=6000, seed=3)
    lo, hi = boot.interval(boot.binary(a, b, "t"))
    plain = []
    for _ in range(3000):  # the textbook loop: draw images, recompute both percentages
        idx = rng.integers(0, n, n)
        plain.append(100.0 * (b[idx].mean() - a[idx].mean()))
    plo, phi = np.quantile(plain, [0.025, 0.975])
    assert lo == pytest.approx(plo, abs=0.25) and hi == pytest.approx(phi, abs=0.25)
    n10, n01 = int((a & ~b).sum()), int((b & ~a).sum())
    d = (n01 - n10) / n
    se = math.sqrt((n01 + n10) / n - d * d) / math.sqrt(n)
    assert lo == pytest.approx(100 * (d - 1.96 * se), abs=0.25)
    assert hi == pytest.approx(100 * (d + 1.96 * se), abs=0.25)
    unpaired = 100 * 1.96 * math.sqrt(a.mean() * (1 - a.mean()) / n + b.mean() * (1 - b.mean()) / n)
    assert (hi - lo) / 2 < 0.8 * unpaired  # pairing narrows the interval of correlated data


def mcnemar_by_hand(n10: int, n01: int) -> float:
    m = n10 + n01
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, k) for k in range(min(n10, n01) + 1)) / 2**m
    return min(1.0, 2 * tail)


# -- the real COCO captions ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def coco_variants(coco_path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Caption 1 and 2 of each COCO val2017 image (its two lowest caption_ids), labelled with
    the real indicator rules (words and pronouns) and matched with the select matcher."""
    from corpus_audit.methods.gender_text import IndicatorTagger, WordMatcher, readable
    from corpus_audit.methods.lexicon import load_gender_terms
    from corpus_audit.methods.texts.mentions import find_mentions

    coco = pd.read_parquet(coco_path, columns=["caption_id", "image_id", "caption"])
    per_image = defaultdict(list)
    for cid, iid, text in coco.itertuples(index=False):
        per_image[iid].append((cid, text))
    rows = []
    for iid, caps in per_image.items():
        (c1, t1), (c2, t2) = sorted(caps)[:2]
        rows += [(iid, "caption1", t1, c1), (iid, "caption2", t2, c2)]
    captions = pd.DataFrame(rows, columns=["image_key", "variant", "caption", "caption_id"])
    tagged = IndicatorTagger(WordMatcher(load_gender_terms())).tag(captions["caption"].tolist())
    captions["label"] = tagged.labels
    captions["triggers"] = [readable(t) for t in tagged.triggers]
    found = find_mentions(captions["caption"].tolist())
    mentions = captions.iloc[found["row"].to_numpy()][["image_key", "variant"]].copy()
    mentions["occupation"] = found["occupation"].to_numpy()
    return captions, mentions.reset_index(drop=True)


@pytest.fixture(scope="module")
def coco_result(coco_variants):
    captions, mentions = coco_variants
    return compare_variants(
        captions, mentions, "caption1", "caption2", bootstrap=PairedBootstrap(replicates=400)
    )


def test_coco_variants_are_the_two_lowest_caption_ids(coco_variants, coco_path):
    captions, _ = coco_variants
    coco = pd.read_parquet(coco_path, columns=["caption_id", "image_id"])
    assert captions["image_key"].nunique() == coco["image_id"].nunique() == 5000
    ids = captions.pivot(index="image_key", columns="variant", values="caption_id")
    assert (ids["caption1"] < ids["caption2"]).all()
    lowest = coco.groupby("image_id")["caption_id"].apply(lambda s: sorted(s)[:2])
    assert lowest.loc[ids.index].tolist() == ids[["caption1", "caption2"]].values.tolist()


def test_coco_indicator_rates_match_loops(coco_variants, coco_result):
    captions, mentions = coco_variants
    label = {
        (k, v): lab
        for k, v, lab in captions[["image_key", "variant", "label"]].itertuples(index=False)
    }
    expected = Counter()
    for (_, variant), lab in label.items():
        expected[(variant, None, lab)] += 1
    for key, variant, occ in set(mentions.itertuples(index=False, name=None)):
        expected[(variant, occ, label[(key, variant)])] += 1
    rates = coco_result.indicator_rates
    for r in rates.itertuples(index=False):
        occ = None if pd.isna(r.occupation) else r.occupation
        got = (r.n_male_only, r.n_female_only, r.n_both, r.n_none)
        want = tuple(expected[(r.variant, occ, lab)] for lab in LABELS)
        assert got == want, (r.variant, occ)
        if r.n_captions:
            assert r.pct_any == pytest.approx(100 * (r.n_captions - want[3]) / r.n_captions)
    everything = row(rates, variant="caption1", occupation=None)
    assert everything.n_captions == 5000
    assert 20 < everything.pct_any < 30  # a quarter of COCO captions name a gender


def test_coco_mentions_and_transitions_match_loops(coco_variants, coco_result):
    captions, mentions = coco_variants
    said = defaultdict(set)
    for key, variant, occ in mentions.itertuples(index=False, name=None):
        said[(key, variant)].add(occ)
    label = {
        (k, v): lab
        for k, v, lab in captions[["image_key", "variant", "label"]].itertuples(index=False)
    }
    keys = sorted({k for k, _ in label})
    occupations = sorted({o for s in said.values() for o in s})
    changes = coco_result.mention_changes
    flips = {(r.occupation, r.image_key, r.change) for r in coco_result.mention_flips.itertuples()}
    trans = coco_result.transitions
    total_changed = 0
    for occ in occupations:
        in_a = {k for k in keys if occ in said[(k, "caption1")]}
        in_b = {k for k in keys if occ in said[(k, "caption2")]}
        r = row(changes, occupation=occ)
        assert (r.n_a, r.n_b, r.n_kept) == (len(in_a), len(in_b), len(in_a & in_b)), occ
        assert (r.n_gained, r.n_lost) == (len(in_b - in_a), len(in_a - in_b)), occ
        assert {(o, k) for o, k, c in flips if o == occ and c == "gained"} == {
            (occ, k) for k in in_b - in_a
        }
        cells = Counter((label[(k, "caption1")], label[(k, "caption2")]) for k in in_a | in_b)
        block = trans[trans["occupation"] == occ]
        for t in block.itertuples():
            assert t.n_images == cells[(t.label_a, t.label_b)], (occ, t.transition)
    any_a = sum(bool(said[(k, "caption1")]) for k in keys)
    assert row(changes, occupation=None).n_a == any_a
    every = trans[trans["occupation"].isna()]
    cells = Counter((label[(k, "caption1")], label[(k, "caption2")]) for k in keys)
    for t in every.itertuples():
        assert t.n_images == cells[(t.label_a, t.label_b)]
        total_changed += t.n_images if t.label_a != t.label_b else 0
    assert coco_result.image_changes["changed"].sum() == total_changed > 100
    # the examples are real: their captions carry the triggers that give their labels
    ex = coco_result.transition_examples
    for r in ex[ex["occupation"].isna()].itertuples():
        want_a, want_b = r.transition.split("->")
        assert (
            label[(r.image_key, "caption1")] == want_a
            and label[(r.image_key, "caption2")] == want_b
        )
        for trig, text in ((r.triggers_a, r.caption_a), (r.triggers_b, r.caption_b)):
            for token in filter(None, trig.split("; ")):
                assert token in text.lower()


def test_coco_paired_differences_match_loops(coco_variants, coco_result):
    captions, mentions = coco_variants
    label = {
        (k, v): lab
        for k, v, lab in captions[["image_key", "variant", "label"]].itertuples(index=False)
    }
    mentioned = {(k, v) for k, v, _ in mentions.itertuples(index=False, name=None)}
    keys = sorted({k for k, _ in label})
    outcomes = {
        "any_indicator": lambda k, v: label[(k, v)] != "none",
        "female_indicator": lambda k, v: label[(k, v)] in ("female", "both"),
        "male_indicator": lambda k, v: label[(k, v)] in ("male", "both"),
        "female_only": lambda k, v: label[(k, v)] == "female",
        "male_only": lambda k, v: label[(k, v)] == "male",
        "both": lambda k, v: label[(k, v)] == "both",
        "mentions": lambda k, v: (k, v) in mentioned,
    }
    diffs = coco_result.differences
    for metric, test in outcomes.items():
        n10 = n01 = ya = yb = 0
        for k in keys:
            x, y = test(k, "caption1"), test(k, "caption2")
            ya += x
            yb += y
            n10 += x and not y
            n01 += y and not x
        r = row(diffs, occupation=None, metric=metric)
        assert (r.n_images, r.n_a_only, r.n_b_only) == (5000, n10, n01), metric
        assert r.value_a == pytest.approx(100 * ya / 5000)
        assert r.difference == pytest.approx(100 * (yb - ya) / 5000)
        assert r.p_value == pytest.approx(mcnemar_by_hand(n10, n01), rel=1e-9), metric
        assert r.ci_low <= r.difference <= r.ci_high


# -- caption-prompt similarity with the real SBERT ------------------------------------------------
def test_coco_caption_prompt_similarity(coco_variants):
    from corpus_audit.backends.embeddings import load_embedder
    from corpus_audit.methods.lexicon import load_occupations, load_prompt_set, render_prompts
    from corpus_audit.methods.recaption.similarity import (
        PAIR_COLUMNS,
        caption_prompt_similarity,
        similarity_inputs,
    )

    captions, mentions = coco_variants
    items = similarity_inputs(captions, mentions, "caption1", "caption2")
    said = defaultdict(set)
    for key, _variant, occ in mentions.itertuples(index=False, name=None):
        said[occ].add(key)
    text = {
        (k, v): t
        for k, v, t in captions[["image_key", "variant", "caption"]].itertuples(index=False)
    }
    want = {
        (k, v, o, text[(k, v)])
        for o, ks in said.items()
        for k in ks
        for v in ("caption1", "caption2")
    }
    assert set(items.itertuples(index=False, name=None)) == want  # both captions of each image

    prompts = pd.DataFrame(render_prompts(load_prompt_set(), load_occupations()))
    embedder = load_embedder()
    sims = caption_prompt_similarity(items, prompts, embedder)
    assert tuple(sims.columns) == PAIR_COLUMNS and len(sims) == 4 * len(items)  # 4 templates
    prompt_text = dict(zip(prompts["prompt_id"], prompts["text"], strict=True))
    for r in sims.sample(12, random_state=0).itertuples():
        one = embedder.encode([text[(r.image_key, r.variant)]])[0]
        other = embedder.encode([prompt_text[r.prompt_id]])[0]
        assert r.prompt_id.endswith(":" + r.occupation)
        assert r.similarity == pytest.approx(float(np.dot(one, other)), abs=0.01)

    result = compare_variants(
        captions, mentions, "caption1", "caption2", similarities=sims,
        bootstrap=PairedBootstrap(replicates=300),
    )  # fmt: skip
    summary = result.similarity
    for variant in ("caption1", "caption2"):
        own = sims[sims["variant"] == variant]["similarity"].tolist()
        r = row(summary, variant=variant, occupation=None)
        assert r.n_pairs == len(own) and r.mean_similarity == pytest.approx(sum(own) / len(own))
        assert -1 <= r.q05 <= r.q50 <= r.q95 <= 1
    per_image = defaultdict(list)
    for r in sims.itertuples():
        per_image[(r.image_key, r.variant)].append(r.similarity)
    keys = sorted({k for k, _ in per_image})
    diff = [np.mean(per_image[(k, "caption2")]) - np.mean(per_image[(k, "caption1")]) for k in keys]
    r = row(result.differences, occupation=None, metric="mean_similarity")
    assert r.n_images == len(keys) and r.difference == pytest.approx(np.mean(diff))
    assert r.ci_low <= r.difference <= r.ci_high

    with pytest.raises(ValueError, match="no prompt for occupation\\(s\\) astronaut"):
        caption_prompt_similarity(items.assign(occupation="astronaut"), prompts, embedder)
    with pytest.raises(ValueError, match="has no caption text"):
        caption_prompt_similarity(items.assign(caption=None), prompts, embedder)
