"""The who-and-how method on the real captions in ../shared/data: COCO val2017, CC3M
validation and the LAION 10 k sample together (50,847 captions, raw HTML included).

Occupation captions come from the project's own ``select`` stage and their explicit-indicator
labels from the ``indicators`` stage (gender words and pronouns; ``use_names = false`` keeps
spaCy out of the test), in one temporary study shared by the module. Counts and z-scores
are checked against independent plain-Python computations written here (``re``, ``html``,
``collections.Counter``, ``math``), not against the code under test.
"""

from __future__ import annotations

import html
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from corpus_audit.backends.embeddings import load_embedder
from corpus_audit.methods.gender_text import WordMatcher, clean_markup, label_of
from corpus_audit.methods.lexicon import (
    AssociationTerms,
    GenderTerms,
    load_association_terms,
    load_gender_terms,
    load_labor_stats,
)
from corpus_audit.methods.texts import (
    agreement,
    associate,
    decile_counts,
    element_scores,
    embed_words,
    marked_words,
    percent_women,
    welch,
)
from corpus_audit.methods.texts.mentions import find_mentions
from corpus_audit.methods.texts.tokens import clean_texts, words_of

CORPORA = (
    ("laion400m_sample_10k.parquet", "TEXT"),
    ("coco_val2017_captions.parquet", "caption"),
    ("cc3m_val_captions.parquet", "caption"),
)
# Tag names and URL pieces that a naive split of the raw LAION captions turns into words.
MARKUP_WORDS = {"href", "br", "font", "span", "http", "https", "www", "quot", "nbsp", "amp"}


@pytest.fixture(scope="module")
def captions(shared_data: Path) -> pd.DataFrame:
    """Every caption of the three corpora: ``file``, ``row``, ``text``."""
    frames = []
    for name, column in CORPORA:
        text = pq.read_table(shared_data / name, columns=[column]).column(column).to_pylist()
        frames.append(pd.DataFrame({"file": name, "row": range(len(text)), "text": text}))
    out = pd.concat(frames, ignore_index=True)
    assert len(out) == 50_847
    return out


@pytest.fixture(scope="module")
def occupation_rows(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """(caption_id, occupation, text, label, file, row) of a real select + indicators run."""
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators
    from corpus_audit.stages.select import select

    root = tmp_path_factory.mktemp("texts_real") / "study"
    study = init_study(
        root,
        [str(shared_data / name) for name, _ in CORPORA],
        overrides={"indicators": {"use_names": False}},
    )
    try:
        select(study, progress=False)
        indicators(study, progress=False)
        rows = study.con.execute(
            "SELECT m.caption_id, m.occupation, c.text, i.label, c.source_file, c.row_in_file "
            "FROM mentions m JOIN captions c USING (caption_id) "
            "JOIN indicators i USING (caption_id) ORDER BY m.caption_id, m.occupation"
        ).df()
    finally:
        study.close()
    rows["file"] = rows.pop("source_file").map(lambda p: Path(p).name)
    rows["row"] = rows.pop("row_in_file")
    return rows


@pytest.fixture(scope="module")
def associations(captions: pd.DataFrame) -> pd.DataFrame:
    return associate(captions["text"])


@pytest.fixture(scope="module")
def gender_terms() -> GenderTerms:
    return load_gender_terms()


@pytest.fixture(scope="module")
def drop_words(gender_terms: GenderTerms) -> list[str]:
    """Pronouns, honorifics and the gender words: they decide the labels compared here."""
    words = [w for g in ("female", "male") for w in gender_terms.words[g]]
    return [*load_association_terms().words(), *words]


# -- an independent plain-Python reading of the same rules ------------------------------------
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:[\t\n\f\r /][^<>]*)?>")
_URL = re.compile(r"(?:[Hh][Tt][Tt][Pp][Ss]?://|[Ww][Ww][Ww]\.)[^\t\n\f\r ]*")
_SPLIT = re.compile(r"[^\w]+")


def py_clean(text: str | None) -> str:
    if text is None:
        return ""
    if "&" in text:
        text = html.unescape(text)
    # lower case by Unicode's simple mapping, as arrow's utf8_lower: "İ" -> "i" (Python's
    # full mapping gives "i" + a combining dot, which would split the word)
    return _URL.sub(" ", _TAG.sub(" ", text)).replace("İ", "i").lower()


def py_words(text: str | None) -> list[str]:
    return [w for w in _SPLIT.split(py_clean(text)) if w]


def py_association(text: str | None, terms: AssociationTerms) -> tuple[tuple[int, ...], str]:
    words = Counter(py_words(text))
    counts = [
        sum(words[w] for w in terms.pronouns["female"]),
        sum(words[w] for w in terms.pronouns["male"]),
        sum(words[w] for w in terms.pronouns["neutral"]),
        sum(words[w] for w in terms.honorifics["female"]),
        sum(words[w] for w in terms.honorifics["male"]),
    ]
    cleaned = py_clean(text)
    nb = sum(len(re.findall(rf"(?<!\w){re.escape(t)}(?!\w)", cleaned)) for t in terms.non_binary)
    f, m, n = counts[0] + counts[3], counts[1] + counts[4], counts[2]
    if nb and n > m and n > f:
        label = "non_binary"
    elif (f > m and f > n) or (not nb and f > m):
        label = "female"
    elif (m > f and m > n) or (not nb and m > f):
        label = "male"
    else:
        label = "none"
    return (*counts, nb), label


def py_marked_words(
    texts: list[str | None], labels: list[str | None], drop_words: list[str]
) -> tuple[dict[str, tuple[float, int, int]], tuple[int, int], set[str]]:
    """Pooled calibrated marked words written out with Counter and math (default settings):
    word -> (z, count female, count male), the two sides' word totals, the corpus top 20."""
    from corpus_audit.methods.texts.marked_words import general_frequencies

    drop = set(drop_words)
    side_counts = {"female": Counter(), "male": Counter()}
    corpus: Counter[str] = Counter()
    for text, lab in zip(texts, labels, strict=True):
        words = [w for w in py_words(text) if len(w) >= 2 and re.search(r"[^\W\d_]", w)]
        words = [w for w in words if w not in drop]
        corpus.update(words)
        if lab in side_counts:
            side_counts[lab].update(words)
    general = general_frequencies("en")
    vocab = list(corpus)
    g_total = sum(general.get(w, 0.0) for w in vocab)
    c_total = sum(corpus.values())
    nf, nm = sum(side_counts["female"].values()), sum(side_counts["male"].values())
    a0 = nf + nm
    top20 = {w for w, _ in sorted(corpus.items(), key=lambda kv: (-kv[1], kv[0]))[:20]}
    expected = {}
    for w in set(side_counts["female"]) | set(side_counts["male"]):
        a = a0 * (0.8 * corpus[w] / c_total + 0.2 * general.get(w, 0.0) / g_total)
        yf, ym = side_counts["female"][w], side_counts["male"][w]
        delta = math.log((yf + a) / (nf + a0 - yf - a)) - math.log((ym + a) / (nm + a0 - ym - a))
        z = delta / math.sqrt(1 / (yf + a) + 1 / (ym + a))
        common = general.get(w, 0.0) > 0 and math.log10(general[w]) + 9 >= 6.0
        if abs(z) > 1.96 and not common and w not in top20:
            expected[w] = (z, yf, ym)
    return expected, (nf, nm), top20


def test_association_equals_an_independent_count_on_all_real_captions(captions, associations):
    terms = load_association_terms()
    expected = [py_association(t, terms) for t in captions["text"]]
    counts = associations[
        [
            "female_pronouns",
            "male_pronouns",
            "neutral_pronouns",
            "female_honorifics",
            "male_honorifics",
            "non_binary_terms",
        ]
    ].to_numpy()
    want = np.array([c for c, _ in expected])
    bad = np.flatnonzero((counts != want).any(axis=1))
    assert bad.size == 0, [captions["text"][i] for i in bad[:5]]
    assert associations["association"].tolist() == [lab for _, lab in expected]
    # the real corpora do hold every kind of term
    assert (counts.sum(axis=0)[:5] > 0).all()
    share = associations["association"].value_counts(normalize=True)
    assert share["none"] > 0.9  # captions rarely use pronouns


def test_words_equal_an_independent_split_on_all_real_captions(captions):
    texts = captions["text"].tolist()
    flat, rows = words_of(clean_texts(texts))
    ours: list[list[str]] = [[] for _ in texts]
    for word, row in zip(flat.to_pylist(), rows.tolist(), strict=True):
        ours[row].append(word)
    bad = [t for t, w in zip(texts, ours, strict=True) if w != py_words(t)]
    assert not bad, bad[:3]


def test_markup_and_urls_give_no_words_on_real_laion_captions(captions):
    laion = captions.loc[captions["file"] == CORPORA[0][0], "text"].dropna()
    marked_up = laion[laion.str.contains(r"<[A-Za-z/]|https?://|www\.", regex=True)].tolist()
    assert len(marked_up) >= 40  # the sample's raw HTML and links
    flat, rows = words_of(clean_texts(marked_up))
    ours: list[set[str]] = [set() for _ in marked_up]
    for word, row in zip(flat.to_pylist(), rows.tolist(), strict=True):
        ours[row].add(word)
    markup_only: set[str] = set()
    for text, words in zip(marked_up, ours, strict=True):
        unescaped = html.unescape(text)
        no_tags = _TAG.sub(" ", unescaped)
        inside = " ".join(_TAG.findall(unescaped) + _URL.findall(no_tags)).lower()
        outside = _URL.sub(" ", no_tags).lower()
        only = set(_SPLIT.split(inside)) - set(_SPLIT.split(outside)) - {""}
        assert not only & words, text  # no word that only markup or an address holds
        markup_only |= only
    assert {"href", "br", "font", "span", "http", "www", "com"} <= markup_only


def test_agreement_with_the_indicator_stage_labels(occupation_rows):
    assoc = associate(occupation_rows["text"])
    label = occupation_rows["label"].to_numpy()
    table = agreement(assoc["association"], label, genders=("female", "male"))
    assert table["specified"].tolist() == [(label == "female").sum(), (label == "male").sum()]
    assert (table["specified"] > 30).all()
    for gender, other in (("female", "male"), ("male", "female")):
        # a pronoun is an explicit indicator, so a caption associated with a gender through a
        # pronoun carries that gender's indicator: only an honorific can associate otherwise
        by_pronoun = (assoc["association"] == gender) & (assoc[f"{gender}_pronouns"] > 0)
        assert set(label[by_pronoun]) <= {gender, "both"}
        wrong = (label == gender) & (assoc["association"] == other)
        assert (assoc.loc[wrong, f"{other}_honorifics"] > 0).all()
    row = table.set_index("gender")
    assert (row["associated_same"] > 0).all()
    assert (row["agreement_pct"] < 100).all()  # many indicated captions have no pronoun


def test_find_mentions_equals_the_select_stage(captions, occupation_rows):
    found = find_mentions(captions["text"])
    found = found.assign(
        file=captions["file"].to_numpy()[found["row"]], r=captions["row"].to_numpy()[found["row"]]
    )
    ours = set(zip(found["file"], found["r"], found["occupation"], strict=True))
    stage = set(
        zip(
            occupation_rows["file"],
            occupation_rows["row"],
            occupation_rows["occupation"],
            strict=True,
        )
    )
    assert ours == stage
    assert len(stage) > 800


def test_who_on_real_occupation_captions(occupation_rows):
    labor = load_labor_stats()
    who = percent_women(occupation_rows["occupation"], occupation_rows["label"], labor)
    groups = occupation_rows.groupby("occupation")["label"]
    assert who["occupation"].tolist() == sorted(groups.groups)
    assert who["texts"].tolist() == groups.size().tolist()
    assert who["female"].tolist() == groups.apply(lambda s: int((s == "female").sum())).tolist()
    assert (who["associated"] == who["female"] + who["male"] + who["non_binary"]).all()
    assert (who["not_associated"] + who["associated"] == who["texts"]).all()
    has = who[who["associated"] > 0]
    assert ((has["ci_low"] <= has["pct_women"]) & (has["pct_women"] <= has["ci_high"])).all()
    with_stat = who[who["labor_pct_women"].notna()].set_index("occupation")
    assert with_stat.loc["nurse", "labor_pct_women"] == labor["nurse"]
    assert with_stat.loc["nurse", "labor_dominated"] == "female"
    assert with_stat.loc["ceo", "labor_dominated"] == "male"
    deciles = decile_counts(who, min_associated=5)
    placed = who[(who["associated"] >= 5) & who["pct_women"].notna()]
    assert deciles["occupations"].sum() == len(placed) > 5


def test_marked_words_equal_an_independent_computation_on_all_real_captions(
    captions, gender_terms, drop_words
):
    """Women- vs men-indicated captions, pooled over all 50 k captions (gender words and
    pronouns label them and are removed before counting)."""
    texts = captions["text"].tolist()
    labels = [label_of(t) for t in WordMatcher(gender_terms).match(clean_markup(texts))]
    res = marked_words(["all"] * len(texts), texts, labels, drop_words=drop_words)

    expected, (nf, nm), top20 = py_marked_words(texts, labels, drop_words)
    got = res.words.set_index("word")
    assert set(got.index) == set(expected)
    for w, (z, yf, ym) in expected.items():
        assert got.loc[w, "z"] == pytest.approx(z, rel=1e-9), w
        assert (got.loc[w, "count_female"], got.loc[w, "count_male"]) == (yf, ym)
    summary = res.summary.iloc[0]
    assert (summary["tokens_female"], summary["tokens_male"]) == (nf, nm)
    assert summary["marked_female"] >= 20 and summary["marked_male"] >= 20
    assert set(res.calibration.loc[res.calibration["corpus_top"], "word"]) == top20


def test_marked_word_rows_on_real_captions_hold_their_promises(captions, gender_terms, drop_words):
    texts = captions["text"].tolist()
    labels = np.array([label_of(t) for t in WordMatcher(gender_terms).match(clean_markup(texts))])
    res = marked_words(
        captions["file"], texts, labels, text_ids=captions.index.tolist(), drop_words=drop_words
    )
    words = res.words
    assert set(words["occupation"]) == {name for name, _ in CORPORA}  # one group per corpus
    assert (words["z"].abs() > 1.96).all()
    assert ((words["z"] > 0) == (words["side"] == "female")).all()
    assert not set(words["word"]) & (set(drop_words) | MARKUP_WORDS)
    assert not set(words["word"]) & set(res.calibration["word"])
    for _, group in words.groupby(["occupation", "side"]):
        assert group["rank"].tolist() == list(range(1, len(group) + 1))
        assert (np.diff(group["z"].abs().to_numpy()) <= 0).all()
    for row in words.itertuples():
        assert 1 <= len(row.example_ids) <= 3
        for tid, text in zip(row.example_ids, row.examples, strict=True):
            assert texts[tid] == text and labels[tid] == row.side
            assert captions.loc[tid, "file"] == row.occupation
            assert row.word in py_words(text)
        on_side = row.texts_female if row.side == "female" else row.texts_male
        assert len(row.example_ids) == min(3, on_side)
    summary = res.summary.set_index("occupation")
    per_file = pd.Series(labels).groupby(captions["file"].to_numpy()).value_counts().unstack()
    assert summary["texts_female"].to_dict() == per_file["female"].to_dict()
    coco = words[words["occupation"] == CORPORA[1][0]]
    assert len(coco) > 40  # 25 k COCO captions: plenty of words on both sides


@pytest.fixture(scope="module")
def srbs_sets(captions, associations, gender_terms, drop_words):
    """Candidates: marked words of captions associated (pronouns) with women / men; targets:
    marked words of captions whose gender a gender *word* specifies. Pooled over all."""
    texts = captions["text"].tolist()
    words_only = GenderTerms(gender_terms.words, {"male": (), "female": ()}, {})
    spec = [label_of(t) for t in WordMatcher(words_only).match(clean_markup(texts))]
    everything = ["all"] * len(texts)
    targets = marked_words(everything, texts, spec, drop_words=drop_words).words
    candidates = marked_words(
        everything, texts, associations["association"], drop_words=drop_words
    ).words
    return candidates, targets


def test_srbs_on_real_captions(srbs_sets):
    candidates, targets = srbs_sets
    vocab = pd.concat([candidates["word"], targets["word"]]).unique().tolist()
    vectors = embed_words(vocab, load_embedder())
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-3 for v in vectors.values())

    def stack(frame: pd.DataFrame, side: str) -> np.ndarray:
        return np.stack([vectors[w] for w in frame.loc[frame["side"] == side, "word"]])

    t_f, t_m = stack(targets, "female"), stack(targets, "male")
    scores = {s: element_scores(stack(candidates, s), t_f, t_m) for s in ("female", "male")}
    for s in scores.values():
        assert ((s >= -2) & (s <= 2)).all()
    result = welch(scores["female"], scores["male"], unit="word").iloc[0]
    assert result["n_female"] >= 10 and result["n_male"] >= 10
    # The words that mark pronoun-associated women's captions lie nearer the words that mark
    # captions *saying* "woman", and the men's nearer "man": many captions carry both cues
    # and the two sets of texts overlap, so this must hold, and strongly.
    assert result["mean_female"] < 0 < result["mean_male"]
    assert result["p"] < 0.01
