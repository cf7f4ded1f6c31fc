"""Who and how (METHODS 4) on hand-made inputs: the association rule, the terms file,
Fightin' Words against a worked example, S / SRBS by hand, Welch against scipy, who tables.

The real-corpus run of the whole method is in ``test_texts_real.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from corpus_audit.core.errors import CorpusError
from corpus_audit.methods.lexicon import LexiconError, load_association_terms
from corpus_audit.methods.texts import (
    MarkedWordsSettings,
    agreement,
    associate,
    compare_sides,
    decide,
    decile_counts,
    element_scores,
    marked_words,
    percent_women,
    srbs,
    srbs_by_occupation,
    subset_similarity,
    welch,
)
from corpus_audit.methods.texts.tokens import clean_texts, text_array, vocabulary_mask, words_of

COUNTS = [
    "female_pronouns",
    "male_pronouns",
    "neutral_pronouns",
    "female_honorifics",
    "male_honorifics",
    "non_binary_terms",
]


# -- the terms file ---------------------------------------------------------------------------
def test_builtin_association_terms_are_the_methods_lists():
    terms = load_association_terms()
    assert terms.pronouns == {
        "female": ("she", "her", "hers", "herself"),
        "male": ("he", "him", "his", "himself"),
        "neutral": ("they", "them", "their", "theirs", "themself", "themselves"),
    }
    assert terms.honorifics == {"female": ("ms", "mrs", "miss"), "male": ("mr",)}
    assert terms.non_binary == ("non-binary", "nonbinary", "they/them")
    assert terms.language == "en"
    assert set(terms.words()) == {w for v in terms.pronouns.values() for w in v} | {
        "ms",
        "mrs",
        "miss",
        "mr",
    }


def _terms_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "terms.toml"
    path.write_text(body, encoding="utf-8")
    return str(path)


GERMAN = """
language = "de"
[pronouns]
female = ["sie", "ihr"]
male = ["er", "ihm", "sein"]
neutral = ["xier"]
[honorifics]
female = ["frau"]
male = ["herr"]
[non_binary]
terms = ["nichtbinär", "nicht-binär"]
"""


def test_another_language_is_a_file(tmp_path: Path):
    terms = load_association_terms(_terms_file(tmp_path, GERMAN))
    out = associate(
        [
            "Frau Müller ist Ärztin, sie arbeitet viel.",
            "Herr Kaya und sein Team",
            "Xier ist nicht-binär, xier malt",
        ],
        terms,
    )
    assert out["association"].tolist() == ["female", "male", "non_binary"]
    assert out.loc[0, "female_honorifics"] == 1 and out.loc[0, "female_pronouns"] == 1
    assert out.loc[2, "neutral_pronouns"] == 2 and out.loc[2, "non_binary_terms"] == 1
    assert terms.language == "de"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            GERMAN.replace('neutral = ["xier"]\n', ""),
            "needs exactly the lists female, male, neutral",
        ),
        (GERMAN.replace('["herr"]', '["herr doktor"]'), "'herr doktor' is not one word"),
        (GERMAN.replace('["herr"]', '["sie"]'), "'sie' is listed in pronouns.female"),
        (GERMAN.replace('["nichtbinär", "nicht-binär"]', "[]"), "non_binary.terms is empty"),
        (GERMAN.replace('["frau"]', '"frau"'), "honorifics.female must be a list of strings"),
        (GERMAN.replace('language = "de"', "language = 3"), "language must be a language code"),
        ("[pronouns", "not valid TOML"),
    ],
)
def test_bad_terms_file_is_an_error_naming_it(tmp_path: Path, body: str, message: str):
    spec = _terms_file(tmp_path, body)
    with pytest.raises(LexiconError, match=message) as err:
        load_association_terms(spec)
    assert "terms.toml" in str(err.value)


# -- the association rule -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("f", "m", "n", "b", "expected"),
    [
        (0, 0, 0, 0, "none"),  # nothing gendered
        (2, 1, 0, 0, "female"),  # F > M
        (1, 2, 0, 0, "male"),
        (1, 1, 0, 0, "none"),  # tie
        (1, 1, 5, 0, "none"),  # tie, neutral does not decide without a non-binary term
        (1, 0, 5, 0, "female"),  # no non-binary term: F > M is enough
        (0, 1, 5, 0, "male"),
        (0, 0, 2, 1, "non_binary"),  # term and N beats both
        (1, 0, 2, 1, "non_binary"),
        (1, 1, 2, 1, "non_binary"),
        (2, 0, 1, 1, "female"),  # term, but F beats M and N
        (0, 3, 2, 1, "male"),
        (1, 0, 1, 1, "none"),  # term, F = N: neither rule holds
        (0, 2, 2, 1, "none"),
        (2, 2, 3, 0, "none"),  # no term: neutral never gives non_binary
        (2, 2, 1, 1, "none"),  # term, F = M > N
    ],
)
def test_decision_rule_every_branch(f, m, n, b, expected):
    assert decide([f], [m], [n], [b]).tolist() == [expected]


CASES = [
    # text, expected counts (f, m, n pronouns; f, m honorifics; non-binary terms), association
    ("She is a nurse; her patients love her.", (3, 0, 0, 0, 0, 0), "female"),
    ("He fixed his own car himself", (0, 3, 0, 0, 0, 0), "male"),
    ("Mrs. Dalloway, the teacher", (0, 0, 0, 1, 0, 0), "female"),
    ("Portrait of Mr Smith, CEO", (0, 0, 0, 0, 1, 0), "male"),
    ("Mr. Lee thanked her", (1, 0, 0, 0, 1, 0), "none"),  # honorific + pronoun tie
    ("he and she", (1, 1, 0, 0, 0, 0), "none"),
    ("Sam (they/them) is a nonbinary chef", (0, 0, 2, 0, 0, 2), "non_binary"),
    ("A Non-Binary artist: they paint; their studio", (0, 0, 2, 0, 0, 1), "non_binary"),
    ("The non-binary model said she and her sister liked them", (2, 0, 1, 0, 0, 1), "female"),
    ("non-binary: she said they", (1, 0, 1, 0, 0, 1), "none"),
    ("They said she left; they took their car", (1, 0, 3, 0, 0, 0), "female"),
    ("Ms. Jones and MS. Lee, Miss Universe", (0, 0, 0, 3, 0, 0), "female"),
    # whole words only: herb, hero, theme, Hershey, mrsa, shell are not terms
    ("herb garden, hero theme, Hershey shell, MRSA test", (0, 0, 0, 0, 0, 0), "none"),
    # markup and URLs are not text
    ("<a href='http://she.com/his'>photo</a> www.her.com", (0, 0, 0, 0, 0, 0), "none"),
    ("&lt;b&gt;HER&lt;/b&gt; dress", (1, 0, 0, 0, 0, 0), "female"),
    ("", (0, 0, 0, 0, 0, 0), "none"),
    (None, (0, 0, 0, 0, 0, 0), "none"),
]


def test_counts_and_association_of_hand_written_texts():
    out = associate([c[0] for c in CASES])
    assert list(out.columns) == [*COUNTS, "association"]
    for i, (text, counts, expected) in enumerate(CASES):
        assert tuple(out.loc[i, COUNTS]) == counts, text
        assert out.loc[i, "association"] == expected, text


def test_every_occurrence_counts_and_inputs_can_be_arrow_or_pandas():
    texts = ["his his his and her", "nonbinary non-binary they/them"]
    for given in (texts, pa.array(texts), pa.chunked_array([texts]), pd.Series(texts)):
        out = associate(given)
        assert out.loc[0, ["female_pronouns", "male_pronouns"]].tolist() == [1, 3]
        assert out.loc[1, "non_binary_terms"] == 3
        assert out.loc[1, "neutral_pronouns"] == 2
    empty = associate([])
    assert list(empty.columns) == [*COUNTS, "association"] and len(empty) == 0


def test_bad_text_is_a_clear_error():
    with pytest.raises(CorpusError, match=r"^bios.jsonl: row 1: not UTF-8 text$"):
        associate(["ok", b"\xff\xfe"], source="bios.jsonl")
    with pytest.raises(CorpusError, match="row 0: not valid Unicode text"):
        associate(["a\ud800"])
    with pytest.raises(CorpusError, match=r"row 2: not text \(int\)"):
        associate(["a", None, 7])
    assert text_array([b"caf\xc3\xa9", float("nan"), pd.NA]).to_pylist() == ["café", None, None]
    series = pd.Series(["a", None], dtype="string")
    assert text_array(series).to_pylist() == ["a", None]
    with pytest.raises(CorpusError, match="row 1: not UTF-8 text"):
        text_array(pa.array([b"ok", b"\xff"], pa.binary()))


def test_agreement_per_gender():
    assoc = ["female", "female", "none", "male", "male", "male", "non_binary", "none"]
    spec = ["female", "female", "female", "female", "male", "male", "both", None]
    out = agreement(assoc, spec).set_index("gender")
    assert out.loc["female"].to_dict() == {
        "specified": 4,
        "associated_same": 2,
        "associated_other": 1,
        "not_associated": 1,
        "agreement_pct": 50.0,
        "agreement_associated_pct": pytest.approx(200 / 3),
    }
    assert out.loc["male", "agreement_pct"] == 100.0
    assert out.loc["non_binary", "specified"] == 0
    assert math.isnan(out.loc["non_binary", "agreement_pct"])
    with pytest.raises(ValueError, match="2 associations but 1"):
        agreement(["female", "male"], ["female"])


# -- tokens -------------------------------------------------------------------------------------
def test_words_leave_out_markup_urls_and_short_pieces():
    raw = [
        "<a href='https://x.com/a'>Portrait</a> of a <font><b>NURSE</b></font>'s day<br/>",
        "see WWW.Example.org/p?q=1 or http://t.co now &amp; 2019 4k",
    ]
    flat, rows = words_of(clean_texts(raw))
    words = flat.to_pylist()
    assert words == ["portrait", "of", "a", "nurse", "s", "day", "see", "or", "now", "2019", "4k"]
    assert rows.tolist() == [0] * 6 + [1] * 5
    vocab = [w for w, keep in zip(words, vocabulary_mask(flat), strict=True) if keep]
    assert vocab == ["portrait", "of", "nurse", "day", "see", "or", "now", "4k"]


# -- Fightin' Words: a worked example computed here ------------------------------------------------
# Occupation nurse: two texts per side, one unlabelled text that only feeds the prior;
# occupation pilot: one text per side.
WORKED = [
    ("nurse", "kind caring kind", "female"),
    ("nurse", "kind smile", "female"),
    ("nurse", "strong strong smile", "male"),
    ("nurse", "strong kind", "male"),
    ("nurse", "smile smile caring", "none"),
    ("pilot", "calm", "female"),
    ("pilot", "calm strong", "male"),
]
# General-English frequencies; "the" is not in the corpus and must not change the prior.
BACKGROUND = {
    "kind": 2e-4,
    "caring": 1e-5,
    "smile": 5e-5,
    "strong": 1e-4,
    "calm": 4e-5,
    "the": 0.05,
}


def _worked_z(
    prior_strength: float | None, lam: float
) -> dict[tuple[str, str], tuple[float, float]]:
    """(occupation, word) -> (z, delta) by the formula of Monroe et al., written out."""
    vocab = ["kind", "caring", "smile", "strong", "calm"]
    corpus = np.array([4, 2, 4, 4, 2], dtype=float)  # counted by hand over all 7 texts: 16 words
    general = np.array([BACKGROUND[w] for w in vocab])
    mix = lam * corpus / corpus.sum() + (1 - lam) * general / general.sum()
    # occurrences per side, by hand: (female, male)
    y = {
        "nurse": {"kind": (3, 1), "caring": (1, 0), "smile": (1, 1), "strong": (0, 3)},
        "pilot": {"calm": (1, 1), "strong": (0, 1)},
    }
    n = {"nurse": (5, 5), "pilot": (1, 2)}
    out = {}
    for occ, words in y.items():
        nf, nm = n[occ]
        a0 = prior_strength if prior_strength is not None else nf + nm
        for word, (yf, ym) in words.items():
            a = a0 * mix[vocab.index(word)]
            delta = math.log((yf + a) / (nf + a0 - yf - a)) - math.log(
                (ym + a) / (nm + a0 - ym - a)
            )
            out[(occ, word)] = (delta / math.sqrt(1 / (yf + a) + 1 / (ym + a)), delta)
    return out


@pytest.mark.parametrize(("prior_strength", "lam"), [(None, 0.75), (100.0, 0.75), (None, 1.0)])
def test_fightin_words_z_scores_match_the_worked_example(prior_strength, lam):
    occ, texts, labels = zip(*WORKED, strict=True)
    settings = MarkedWordsSettings(
        z_threshold=1e-9, corpus_weight=lam, prior_strength=prior_strength, corpus_top=0
    )
    res = marked_words(occ, texts, labels, settings=settings, background=BACKGROUND)
    expected = _worked_z(prior_strength, lam)
    got = {(r.occupation, r.word): (r.z, r.log_odds) for r in res.words.itertuples()}
    # equal counts on both sides and equal totals: z = 0 exactly, so not marked
    assert ("nurse", "smile") not in got
    del expected[("nurse", "smile")]
    assert got.keys() == expected.keys()
    for key, (z, delta) in expected.items():
        assert got[key] == pytest.approx((z, delta), rel=1e-12), key
    for r in res.words.itertuples():
        assert r.side == ("female" if r.z > 0 else "male")
    nurse = res.words[res.words["occupation"] == "nurse"].set_index("word")
    assert nurse.loc[
        "kind", ["count_female", "count_male", "texts_female", "texts_male"]
    ].tolist() == [
        3,
        1,
        2,
        1,
    ]
    summary = res.summary.set_index("occupation")
    assert summary.loc[
        "nurse", ["texts_female", "texts_male", "tokens_female", "tokens_male"]
    ].tolist() == [
        2,
        2,
        5,
        5,
    ]
    assert summary.loc["nurse", "words_compared"] == 4
    assert summary.loc["pilot", "prior_strength"] == (prior_strength or 3)
    assert res.prior["corpus_tokens"] == 16 and res.prior["vocabulary"] == 5


def test_worked_example_at_the_usual_threshold_marks_nothing():
    """Two texts a side are far too few for |z| > 1.96: the prior keeps z small."""
    occ, texts, labels = zip(*WORKED, strict=True)
    res = marked_words(occ, texts, labels, background=BACKGROUND, drop_words=())
    assert res.words.empty
    assert max(abs(z) for z, _ in _worked_z(None, 0.8).values()) < 1.96


def _skewed(n: int = 40) -> tuple[list[str], list[str], list[str]]:
    """One occupation; women's texts say 'gentle', men's 'tough'; both say 'photo'."""
    occ, texts, labels = [], [], []
    for i in range(n):
        occ += ["nurse", "nurse"]
        texts += [f"gentle photo item{i}", f"tough photo item{i}"]
        labels += ["female", "male"]
    return occ, texts, labels


def test_calibration_removes_common_english_and_the_corpus_top_words():
    occ, texts, labels = _skewed()
    background = {"gentle": 1e-5, "tough": 2e-3, "photo": 1e-4}  # tough: Zipf 6.3 (common)
    res = marked_words(
        occ,
        texts,
        labels,
        background=background,
        drop_words=(),
        settings=MarkedWordsSettings(corpus_top=0),
    )
    assert res.words["word"].tolist() == ["gentle"]  # tough is significant but common English
    assert res.words.loc[0, "z"] > 1.96
    cal = res.calibration.set_index("word")
    assert cal.loc["tough", "common_english"] and cal.loc["tough", "zipf"] == pytest.approx(
        math.log10(2e-3) + 9
    )
    # the default corpus_top = 20 takes every word of this 43-word corpus
    assert marked_words(occ, texts, labels, background=background, drop_words=()).words.empty
    # corpus_top = 1: the most frequent word (photo, 80) goes, but it was not significant
    res1 = marked_words(
        occ,
        texts,
        labels,
        background=background,
        drop_words=(),
        settings=MarkedWordsSettings(corpus_top=1, common_zipf=7.0),
    )
    assert sorted(res1.words["word"]) == ["gentle", "tough"]
    assert res1.calibration["word"].tolist() == ["photo"]
    res2 = marked_words(
        occ,
        texts,
        labels,
        background=background,
        drop_words=(),
        settings=MarkedWordsSettings(corpus_top=2, common_zipf=7.0),
    )  # gentle and tough tie at 40 after photo; the tie goes by word: gentle
    assert res2.words["word"].tolist() == ["tough"]
    assert res2.summary.loc[0, "removed_by_calibration"] == 1


def test_pronouns_are_removed_before_counting_and_markup_gives_no_words():
    occ = ["chef"] * 4
    texts = [
        "<a href='http://www.shop.com/x'>She</a> cooks; her kitchen",
        "she cooks",
        "he grills his steak",
        "He grills",
    ]
    labels = ["female", "female", "male", "male"]
    res = marked_words(
        occ,
        texts,
        labels,
        background={"cooks": 1e-6},
        settings=MarkedWordsSettings(z_threshold=1e-9, corpus_top=0),
    )
    words = set(res.words["word"])
    assert words == {"cooks", "kitchen", "grills", "steak"}
    summary = res.summary.iloc[0]
    assert (summary["tokens_female"], summary["tokens_male"]) == (3, 3)
    assert res.prior["corpus_tokens"] == 6


def test_marked_word_rows_examples_and_ranks():
    occ, texts, labels = _skewed(30)
    occ += ["pilot"] * 3
    texts += ["calm", "calm", "calm"]
    labels += ["female", "female", "none"]  # pilot has no men's texts: not compared
    ids = [f"t{i}" for i in range(len(texts))]
    res = marked_words(
        occ,
        texts,
        labels,
        text_ids=ids,
        background={"gentle": 1e-5, "tough": 1e-5},
        settings=MarkedWordsSettings(examples=2, corpus_top=0),
    )
    w = res.words.set_index("word")
    assert list(res.words.columns) == [
        "occupation",
        "side",
        "rank",
        "word",
        "z",
        "log_odds",
        "count_female",
        "count_male",
        "texts_female",
        "texts_male",
        "examples",
        "example_ids",
    ]
    assert w.loc["gentle", "examples"] == ["gentle photo item0", "gentle photo item1"]
    assert w.loc["gentle", "example_ids"] == ["t0", "t2"]
    assert w.loc["tough", "example_ids"] == ["t1", "t3"]
    assert w.loc["gentle", "side"] == "female" and w.loc["tough", "side"] == "male"
    assert (res.words["rank"] == 1).all()
    pilot = res.summary.set_index("occupation").loc["pilot"]
    assert not pilot["compared"] and pilot["texts_female"] == 2 and pilot["texts_male"] == 0
    assert "pilot" not in set(res.words["occupation"])


def test_marked_words_bad_input():
    with pytest.raises(CorpusError, match="bios.csv: row 1: the occupation is missing"):
        marked_words(["a", None], ["x", "y"], ["female", "male"], source="bios.csv")
    with pytest.raises(ValueError, match="2 texts but 1 gender labels"):
        marked_words(["a", "a"], ["x", "y"], ["female"])
    with pytest.raises(ValueError, match="corpus_weight 1.5 not in"):
        MarkedWordsSettings(corpus_weight=1.5)
    with pytest.raises(ValueError, match="z_threshold"):
        MarkedWordsSettings(z_threshold=0)
    from corpus_audit.core.errors import ModelError

    with pytest.raises(ModelError, match="no word list for language 'xx'"):
        marked_words(["a"], ["x"], ["female"], settings=MarkedWordsSettings(language="xx"))
    empty = marked_words([], [], [], background={})
    assert empty.words.empty and empty.summary.empty
    assert list(empty.summary.columns)[-1] == "prior_strength"


# -- S and SRBS by hand ------------------------------------------------------------------------
def test_subset_similarity_by_hand():
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    b = np.array([[1.0, 0.0], [1.0, 1.0]])
    # a1 = b1: distance 0. a2 vs b1: cos 0 -> 1; vs b2: cos 1/sqrt(2) -> 1 - 0.7071; min 0.2929
    assert subset_similarity(a, b) == pytest.approx((0 + (1 - 1 / math.sqrt(2))) / 2)
    # not symmetric: b2 is 0.2929 from a1 and a2, b1 is 0 from a1
    assert subset_similarity(b, a) == pytest.approx((1 - 1 / math.sqrt(2)) / 2)
    assert subset_similarity(a * 7.0, b * 0.1) == pytest.approx(subset_similarity(a, b))
    assert subset_similarity(a, a) == pytest.approx(0.0, abs=1e-15)
    assert subset_similarity(np.array([[1.0, 2.0]]), np.array([[-1.0, -2.0]])) == pytest.approx(2.0)
    assert subset_similarity(np.array([[3.0, 0.0]]), np.array([[1.0, 1.0], [0.0, -1.0]])) == (
        pytest.approx(1 - 1 / math.sqrt(2))
    )


def test_srbs_by_hand():
    c = np.array([[1.0, 0.0], [1.0, 1.0]])
    t_f = np.array([[1.0, 0.0]])
    t_m = np.array([[0.0, 1.0]])
    # c1: 0 from T_f, 1 from T_m -> -1; c2: 1 - 1/sqrt2 from both -> 0; SRBS = -0.5
    assert element_scores(c, t_f, t_m) == pytest.approx([-1.0, 0.0])
    assert srbs(c, t_f, t_m) == pytest.approx(-0.5)
    assert srbs(np.array([[0.0, 2.0]]), t_f, t_m) == pytest.approx(1.0)  # closer to men
    rng = np.random.default_rng(0)
    for _ in range(20):
        c, f, m = (rng.normal(size=(rng.integers(1, 6), 4)) for _ in range(3))
        assert -2.0 <= srbs(c, f, m) <= 2.0
        assert 0.0 <= subset_similarity(c, f) <= 2.0


def test_subset_similarity_bad_input():
    with pytest.raises(ValueError, match="subset A: the set is empty"):
        subset_similarity(np.zeros((0, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="zero or not finite"):
        subset_similarity(np.array([[0.0, 0.0]]), np.ones((1, 2)))
    with pytest.raises(ValueError, match="dimensions differ"):
        subset_similarity(np.ones((1, 2)), np.ones((1, 3)))


def test_welch_against_scipy_and_the_formula():
    from scipy.stats import ttest_ind

    x = [0.12, -0.05, 0.3, 0.22, 0.01, 0.18]
    y = [-0.2, -0.31, 0.05, -0.12]
    out = welch(x, y, unit="word").iloc[0]
    ref = ttest_ind(x, y, equal_var=False)
    assert out["t"] == pytest.approx(float(ref.statistic), rel=1e-12)
    assert out["p"] == pytest.approx(float(ref.pvalue), rel=1e-12)
    vx, vy = np.var(x, ddof=1) / len(x), np.var(y, ddof=1) / len(y)
    assert out["t"] == pytest.approx((np.mean(x) - np.mean(y)) / math.sqrt(vx + vy))
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    assert out["df"] == pytest.approx(df)
    assert (out["unit"], out["n_female"], out["n_male"]) == ("word", 6, 4)
    assert out["mean_female"] == pytest.approx(np.mean(x))
    short = welch([0.1, float("nan")], [0.2, 0.3]).iloc[0]  # one score left on a side
    assert short["n_female"] == 1 and math.isnan(short["t"]) and math.isnan(short["p"])


def test_srbs_by_occupation_and_comparison():
    vectors = {
        "gentle": np.array([1.0, 0.0]),
        "soft": np.array([1.0, 0.1]),
        "tough": np.array([0.0, 1.0]),
        "hard": np.array([0.1, 1.0]),
        "odd": np.array([1.0, 1.0]),
    }
    candidates = pd.DataFrame(
        {
            "occupation": ["a", "a", "a", "b", "b", "c"],
            "side": ["female", "female", "male", "female", "male", "male"],
            "word": ["soft", "odd", "hard", "soft", "odd", "hard"],
        }
    )
    targets = pd.DataFrame({"side": ["female", "male"], "word": ["gentle", "tough"]})
    table = srbs_by_occupation(candidates, targets, vectors)
    assert list(table.columns) == [
        "occupation",
        "side",
        "words",
        "targets_female",
        "targets_male",
        "s_female",
        "s_male",
        "srbs",
    ]
    row = table.set_index(["occupation", "side"]).loc[("a", "female")]
    soft_f = 1 - 1 / math.sqrt(1.01)  # cos(soft, gentle) = 1 / sqrt(1.01)
    soft_m = 1 - 0.1 / math.sqrt(1.01)
    odd = 1 - 1 / math.sqrt(2)
    assert row["words"] == 2
    assert row["s_female"] == pytest.approx((soft_f + odd) / 2)
    assert row["srbs"] == pytest.approx((soft_f + odd) / 2 - (soft_m + odd) / 2)
    # per-occupation targets: occupation c has none -> NaN
    per_occ = targets.assign(occupation="a")
    t2 = srbs_by_occupation(candidates, per_occ, vectors).set_index(["occupation", "side"])
    assert (
        math.isnan(t2.loc[("c", "male"), "srbs"]) and t2.loc[("c", "male"), "targets_female"] == 0
    )
    cmp = compare_sides(table).iloc[0]
    female = table.loc[table["side"] == "female", "srbs"]
    male = table.loc[table["side"] == "male", "srbs"]
    assert cmp["n_female"] == 2 and cmp["n_male"] == 3
    assert cmp["mean_female"] == pytest.approx(female.mean()) and cmp["mean_male"] == pytest.approx(
        male.mean()
    )
    with pytest.raises(KeyError, match="no vector for the word"):
        srbs_by_occupation(candidates.assign(word="missing"), targets, vectors)
    with pytest.raises(ValueError, match=r"targets lacks the column\(s\) \['side'\]"):
        srbs_by_occupation(candidates, targets.drop(columns="side"), vectors)
    empty = srbs_by_occupation(candidates.iloc[:0], targets, vectors)
    assert empty.empty and list(empty.columns) == list(table.columns)


# -- who -------------------------------------------------------------------------------------
def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def test_percent_women_and_deciles_by_hand():
    occ = ["nurse"] * 6 + ["pilot"] * 4 + ["poet"] * 2
    lab = ["female", "female", "female", "male", "none", "both"]
    lab += ["male", "male", "male", "non_binary"]
    lab += ["none", None]
    labor = {"Nurse": 87.9, "pilot": None, "poet": 50.0}
    who = percent_women(occ, lab, labor).set_index("occupation")
    nurse = who.loc["nurse"]
    assert (nurse["texts"], nurse["female"], nurse["male"], nurse["not_associated"]) == (6, 3, 1, 2)
    assert nurse["pct_women"] == 75.0 and nurse["decile"] == 7
    assert (nurse["ci_low"], nurse["ci_high"]) == pytest.approx(_wilson(3, 4))
    assert nurse["labor_pct_women"] == 87.9 and nurse["labor_dominated"] == "female"
    assert nurse["difference_pp"] == pytest.approx(75.0 - 87.9)
    pilot = who.loc["pilot"]
    assert pilot["associated"] == 4 and pilot["pct_women"] == 0.0 and pilot["decile"] == 0
    assert math.isnan(pilot["labor_pct_women"]) and pd.isna(pilot["labor_dominated"])
    poet = who.loc["poet"]
    assert math.isnan(poet["pct_women"]) and pd.isna(poet["decile"])
    assert poet["labor_dominated"] == "female"  # sides: < 50 and >= 50 (METHODS 1.7)
    dec = decile_counts(who.reset_index(), min_associated=4)
    assert dec["decile"].tolist() == list(range(10))
    assert dec.loc[7, ["female_dominated", "male_dominated", "no_statistic"]].tolist() == [1, 0, 0]
    assert dec.loc[0, "no_statistic"] == 1 and dec["occupations"].sum() == 2
    assert decile_counts(who.reset_index(), min_associated=5)["occupations"].sum() == 0
    with pytest.raises(CorpusError, match="row 1: the occupation is missing"):
        percent_women(["a", None], ["female", "male"])


@pytest.mark.parametrize(("female", "male", "decile"), [(1, 0, 9), (1, 9, 1), (999, 9001, 0)])
def test_decile_edges(female, male, decile):
    who = percent_women(["x"] * (female + male), ["female"] * female + ["male"] * male)
    assert who.loc[0, "decile"] == decile


def test_figures_draw_the_tables():
    from corpus_audit.report.who_how_figures import decile_figure, who_scatter

    occ = ["nurse"] * 10 + ["ceo"] * 10
    lab = ["female"] * 8 + ["male"] * 2 + ["female"] * 3 + ["male"] * 7
    who = percent_women(occ, lab, {"nurse": 87.9, "ceo": 29.2})
    dec = decile_counts(who)
    fig = decile_figure(dec)
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert len(heights) == 30 and sum(heights) == 2
    assert (
        heights[8] == 1 and heights[10 + 3] == 1
    )  # nurse 80 % (female-dom.), ceo 30 % (male-dom.)
    assert fig.axes[0].get_xticklabels()[0].get_text() == "0-10"
    scatter = who_scatter(who)
    points = scatter.axes[0].lines[1].get_xydata()
    assert sorted(map(tuple, points)) == [(29.2, 30.0), (87.9, 80.0)]


# -- mentions -------------------------------------------------------------------------------------
def test_find_mentions_and_occupation_words():
    from corpus_audit.methods.texts.mentions import find_mentions, occupation_words

    found = find_mentions(
        [
            "A nurse and a Prime  Minister meet the nurses",
            "internal cookbook cookie",
            None,
            "the teacher's Teachers",
            "Graphic-Designer",
        ]
    )
    assert list(found.itertuples(index=False, name=None)) == [
        (0, "nurse"),
        (0, "prime minister"),
        (3, "teacher"),
        (4, "graphic designer"),
    ]
    assert find_mentions([]).empty
    words = set(occupation_words())
    assert {"nurse", "nurses", "ceo", "hairstylist", "dancer"} <= words
    assert not {"prime", "minister", "hair", "fashion", "graphic"} & words  # multi-word pieces
