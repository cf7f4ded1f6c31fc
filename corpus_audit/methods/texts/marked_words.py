"""How: calibrated marked words within each occupation (METHODS 4).

Fightin' Words (Monroe, Colaresi & Quinn 2008, "Fightin' Words: Lexical Feature Selection
and Evaluation for Identifying the Content of Political Conflict", section 3.5): the
log-odds ratio of a word between the texts associated with women (f) and with men (m) of
one occupation, with an informative Dirichlet prior, and its z-score:

    delta_w = log((y_fw + a_w) / (n_f + a_0 - y_fw - a_w))
            - log((y_mw + a_w) / (n_m + a_0 - y_mw - a_w))
    var_w   = 1 / (y_fw + a_w) + 1 / (y_mw + a_w)
    z_w     = delta_w / sqrt(var_w)

``y_fw``: occurrences of word w in the occupation's female texts, ``n_f``: all their word
occurrences (likewise m). A word with z > ``z_threshold`` (1.96: two-sided 5 %) marks the
women's texts, z < -1.96 the men's.

**Prior** (``a_w``, ``a_0 = sum_w a_w``): a mixture of the corpus and general English,
weighted towards the corpus:

    a_w = a_0 * (lambda * p_corpus(w) + (1 - lambda) * p_general(w))

- ``p_corpus``: the word's share of all word occurrences of the corpus handed in (every
  occupation, every label, the words removed below left out);
- ``p_general``: the word's frequency in general English from the ``wordfreq`` package
  (``wordlist="best"``), renormalised over the corpus vocabulary; words wordfreq does not
  know get only the corpus part;
- ``lambda`` = ``corpus_weight``, default 0.8: the corpus's own genre (``stock``, ``photo``,
  ``illustration`` are common in captions and rare in English) dominates, and a fifth of the
  prior mass keeps words that are common in English from looking surprising in a small corpus;
- ``a_0`` = ``prior_strength``: by default, per occupation, the number of word occurrences
  the comparison counts (n_f + n_m), so the prior weighs as much as the texts compared. The
  implementations that take the whole background corpus's counts as the prior (a_0 = the
  corpus size) swamp a comparison of a few hundred words: on the 50 k bundled captions,
  women vs men pooled over all captions (74 k words compared, 437 k in the corpus), a_0 =
  corpus size finds 41 significant words, a_0 = n_f + n_m 143 (``beautiful``, ``pretty``,
  ``attractive``, ``blonde`` vs ``tie``, ``suit``, ``skateboard``); within one occupation
  the difference is larger still. A number fixes a_0 for every occupation.

**Calibration**: among the significant words, those that are common in English (wordfreq
Zipf frequency >= ``common_zipf``, default 6.0: at least once per thousand words, about the
100 most frequent English words: ``the``, ``with``, ``people``, ``new``) and the
``corpus_top`` (20) most frequent words of the corpus are removed: they are the frame of
every text, not what marks one group. **Removed before counting**: the pronouns and
honorifics of the association terms (they decide the association, so they would mark their
side by construction) and any ``drop_words`` the caller adds (for captions labelled by
explicit indicators, the gender words that decide the label).

Words are those of :mod:`corpus_audit.methods.texts.tokens` (markup and URLs removed, lower case,
runs of letters/digits/_), keeping words of >= 2 characters with a letter. Only words used
in an occupation's female or male texts are compared for that occupation. Examples of a
marked word are the first texts (in input order) of its side that contain it.

Vectorised: one RE2 split of all texts, one dictionary encoding of the words, ``np.unique``
over (occupation, word, side) keys, and the formula over all (occupation, word) pairs at
once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from corpus_audit.core.errors import CorpusError, ModelError
from corpus_audit.methods.lexicon import load_association_terms
from corpus_audit.methods.texts.tokens import TextInput, clean_texts, text_array, vocabulary_words

SIDES = ("female", "male")
WORD_COLUMNS = (
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
)
SUMMARY_COLUMNS = (
    "occupation",
    "texts_female",
    "texts_male",
    "tokens_female",
    "tokens_male",
    "compared",
    "words_compared",
    "significant",
    "removed_by_calibration",
    "marked_female",
    "marked_male",
    "prior_strength",
)
CALIBRATION_COLUMNS = ("word", "corpus_count", "zipf", "common_english", "corpus_top")


@dataclass(frozen=True)
class MarkedWordsSettings:
    """Parameters of :func:`marked_words` (see the module docstring).

    - ``z_threshold``: |z| above this is significant (> 0; 1.96 = two-sided 5 %);
    - ``corpus_weight``: lambda, the corpus's share of the prior, in [0, 1];
    - ``prior_strength``: a_0 (> 0) for every occupation, or None for each occupation's
      number of compared word occurrences (n_f + n_m);
    - ``common_zipf``: words with a wordfreq Zipf frequency >= this are common English
      (Zipf = log10 of occurrences per billion words; 6.0 = once per thousand);
    - ``corpus_top``: the N most frequent corpus words removed (>= 0);
    - ``language``: wordfreq language code of the general-frequency list;
    - ``min_texts``: an occupation is compared only with at least this many texts on each
      side (>= 1);
    - ``examples``: example texts kept per marked word (>= 0).
    """

    z_threshold: float = 1.96
    corpus_weight: float = 0.8
    prior_strength: float | None = None
    common_zipf: float = 6.0
    corpus_top: int = 20
    language: str = "en"
    min_texts: int = 1
    examples: int = 3

    def __post_init__(self) -> None:
        if not self.z_threshold > 0:
            raise ValueError(f"marked words: z_threshold {self.z_threshold} must be > 0")
        if not 0.0 <= self.corpus_weight <= 1.0:
            raise ValueError(f"marked words: corpus_weight {self.corpus_weight} not in [0, 1]")
        if self.prior_strength is not None and not self.prior_strength > 0:
            raise ValueError(f"marked words: prior_strength {self.prior_strength} must be > 0")
        if self.corpus_top < 0 or self.min_texts < 1 or self.examples < 0:
            raise ValueError(
                "marked words: corpus_top and examples must be >= 0 and min_texts >= 1 "
                f"(got {self.corpus_top}, {self.examples}, {self.min_texts})"
            )


@dataclass
class MarkedWords:
    """The result of :func:`marked_words`: three tables and the prior's numbers.

    ``words``: one row per calibrated marked word of an occupation, columns
    ``occupation``, ``side`` (``female``/``male``: the side the word marks), ``rank`` (1 =
    largest |z| of that occupation and side), ``word``, ``z`` (positive: women's side),
    ``log_odds`` (delta, natural log, female minus male), ``count_female``,
    ``count_male`` (occurrences in the occupation's female/male texts), ``texts_female``,
    ``texts_male`` (texts containing the word), ``examples`` (list of up to ``examples``
    texts of the word's side, as given) and ``example_ids`` (their ids).

    ``summary``: one row per occupation: ``occupation``, ``texts_female``, ``texts_male``,
    ``tokens_female``, ``tokens_male`` (word occurrences), ``compared`` (both sides have
    >= ``min_texts`` texts), ``words_compared`` (distinct words used on either side),
    ``significant`` (|z| > threshold before calibration), ``removed_by_calibration``,
    ``marked_female``, ``marked_male`` (rows of ``words``), ``prior_strength`` (the a_0 of
    the occupation's comparison).

    ``calibration``: the corpus words calibration removes: ``word``, ``corpus_count``,
    ``zipf`` (NaN when the general list lacks the word), ``common_english``, ``corpus_top``.

    ``prior``: ``corpus_weight`` (lambda used), ``corpus_tokens``,
    ``vocabulary`` (distinct words) and ``general_coverage`` (share of the corpus's word
    occurrences whose word the general list knows, 0-1).
    """

    words: pd.DataFrame
    summary: pd.DataFrame
    calibration: pd.DataFrame
    prior: dict[str, float] = field(default_factory=dict)


@lru_cache(maxsize=4)
def general_frequencies(language: str = "en") -> dict[str, float]:
    """wordfreq's frequency list for ``language`` (word -> occurrences per word, 0-1).

    Raises :class:`ModelError` when wordfreq is not installed or lacks the language.
    """
    try:
        import wordfreq
    except ImportError as exc:  # pragma: no cover - declared dependency (extra "text")
        raise ModelError(f"wordfreq is not installed ({exc}); install corpus_audit[text]") from None
    if language not in wordfreq.available_languages():
        raise ModelError(
            f"marked words: wordfreq has no word list for language {language!r} "
            f"(it has {', '.join(sorted(wordfreq.available_languages()))})"
        )
    return wordfreq.get_frequency_dict(language, wordlist="best")


def default_drop_words() -> tuple[str, ...]:
    """The pronouns and honorifics of the built-in association terms."""
    return load_association_terms().words()


def marked_words(
    occupations: Sequence[str] | pd.Series,
    texts: TextInput,
    genders: Sequence[str | None] | pd.Series,
    *,
    text_ids: Sequence[Any] | pd.Series | None = None,
    settings: MarkedWordsSettings | None = None,
    drop_words: Collection[str] | None = None,
    background: Mapping[str, float] | None = None,
    source: str = "texts",
) -> MarkedWords:
    """Calibrated marked words of women's vs men's texts within each occupation.

    Row i is text ``texts[i]`` of occupation ``occupations[i]`` with label ``genders[i]``
    (``female`` and ``male`` are compared; any other label only feeds the prior and the
    corpus's most frequent words). ``text_ids`` name the rows in ``example_ids`` (default:
    the row numbers). ``drop_words`` are removed before counting (default: the pronouns and
    honorifics of the built-in association terms; pass them plus your own to add words).
    ``background`` maps words to general-language frequencies (default: wordfreq's list for
    ``settings.language``); it also decides which words are common (Zipf). Raises
    :class:`CorpusError` naming ``source`` for a missing occupation or a value that is not
    text.
    """
    cfg = settings or MarkedWordsSettings()
    arr = text_array(texts, source)
    cleaned = clean_texts(arr, source)
    n = len(cleaned)
    occ_codes, occ_names = _occupation_codes(occupations, n, source)
    side_codes = _side_codes(genders, n)
    ids = np.arange(n) if text_ids is None else np.asarray(list(text_ids), dtype=object)
    if len(ids) != n:
        raise ValueError(f"marked_words: {n} texts but {len(ids)} text_ids")
    drop = default_drop_words() if drop_words is None else tuple(drop_words)

    word_ids, rows, vocab = vocabulary_words(cleaned, drop)
    counts = _Counts(word_ids, rows, occ_codes, side_codes, len(vocab), len(occ_names))

    bg = general_frequencies(cfg.language) if background is None else background
    general = np.array([float(bg.get(w, 0.0)) for w in vocab], dtype=float)
    mix, prior = _prior(counts.corpus, general, cfg)
    if cfg.prior_strength is None:
        alpha0 = counts.n_tokens.sum(axis=1).astype(float)
    else:
        alpha0 = np.full(len(occ_names), float(cfg.prior_strength))
    removed, calibration = _calibration(vocab, counts.corpus, general, cfg)

    z, delta = fightin_words(
        counts.y[:, 0],
        counts.y[:, 1],
        counts.n_tokens[counts.pair_occ, 0],
        counts.n_tokens[counts.pair_occ, 1],
        alpha0[counts.pair_occ] * mix[counts.pair_word],
        alpha0[counts.pair_occ],
    )
    compared = (counts.n_texts >= cfg.min_texts).all(axis=1)
    significant = compared[counts.pair_occ] & (np.abs(z) > cfg.z_threshold)
    kept = significant & ~removed[counts.pair_word]
    words = _word_table(counts, kept, z, delta, vocab, occ_names, cfg, arr, ids)
    summary = _summary(counts, compared, significant, kept, z, occ_names, alpha0)
    return MarkedWords(words, summary, calibration, prior)


def fightin_words(
    y_female: np.ndarray,
    y_male: np.ndarray,
    n_female: np.ndarray,
    n_male: np.ndarray,
    alpha: np.ndarray,
    alpha0: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray]:
    """``(z, delta)`` of words, vectorised (formula in the module docstring).

    ``y_female``, ``y_male``: the word's occurrences on each side; ``n_female``,
    ``n_male``: all word occurrences of each side of the word's comparison; ``alpha``: the
    word's prior a_w; ``alpha0``: a_0 of its comparison, the sum of a_w over the vocabulary
    (a number or one per word). ``delta`` is the log-odds ratio (natural log, female minus
    male); where the formula is undefined (a one-word vocabulary) both are 0.
    """
    yf = np.asarray(y_female, dtype=float)
    ym = np.asarray(y_male, dtype=float)
    nf = np.asarray(n_female, dtype=float)
    nm = np.asarray(n_male, dtype=float)
    a = np.asarray(alpha, dtype=float)
    a0 = np.asarray(alpha0, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.log((yf + a) / (nf + a0 - yf - a)) - np.log((ym + a) / (nm + a0 - ym - a))
        z = delta / np.sqrt(1.0 / (yf + a) + 1.0 / (ym + a))
    bad = ~np.isfinite(z)
    z[bad] = 0.0
    delta[bad] = 0.0
    return z, delta


# -- steps ----------------------------------------------------------------------------------
def _occupation_codes(
    occupations: Sequence[str] | pd.Series, n: int, source: str
) -> tuple[np.ndarray, list[str]]:
    occ = pd.Series(list(occupations), dtype=object)
    if len(occ) != n:
        raise ValueError(f"marked_words: {n} texts but {len(occ)} occupations")
    missing = np.flatnonzero(occ.isna().to_numpy())
    if missing.size:
        raise CorpusError(f"{source}: row {int(missing[0])}: the occupation is missing")
    codes, names = pd.factorize(occ.astype(str), sort=True)
    return codes.astype(np.int64), [str(x) for x in names]


def _side_codes(genders: Sequence[str | None] | pd.Series, n: int) -> np.ndarray:
    lab = pd.Series(list(genders), dtype=object).to_numpy()
    if len(lab) != n:
        raise ValueError(f"marked_words: {n} texts but {len(lab)} gender labels")
    codes = np.full(n, -1, dtype=np.int64)
    for code, side in enumerate(SIDES):
        codes[lab == side] = code
    return codes


class _Counts:
    """Word counts per (occupation, word) pair and side, and per-occupation totals.

    ``pair_occ``/``pair_word``: the pairs used on either side of a compared label, sorted;
    ``y``: (pairs, 2) occurrences (female, male); ``docs``: (pairs, 2) texts containing
    the word; ``n_tokens``, ``n_texts``: (occupations, 2); ``corpus``: occurrences per word
    over every text; ``text_rows``, ``text_keys``: for each distinct (text, word) of a
    labelled text, sorted by text, the text's row and the key
    ``(occupation * V + word) * 2 + side`` of its pair and side.
    """

    def __init__(
        self,
        word_ids: np.ndarray,
        rows: np.ndarray,
        occ_codes: np.ndarray,
        side_codes: np.ndarray,
        n_words: int,
        n_occ: int,
    ):
        self.n_words = n_words
        self.corpus = np.bincount(word_ids, minlength=n_words)
        side = side_codes[rows]
        on_side = side >= 0
        w, r, s = word_ids[on_side], rows[on_side], side[on_side]
        o = occ_codes[r]
        self.n_tokens = np.bincount(o * 2 + s, minlength=n_occ * 2).reshape(n_occ, 2)
        labelled = np.flatnonzero(side_codes >= 0)
        self.n_texts = np.bincount(
            occ_codes[labelled] * 2 + side_codes[labelled], minlength=n_occ * 2
        ).reshape(n_occ, 2)
        keys, occurrences = np.unique((o * n_words + w) * 2 + s, return_counts=True)
        pairs, where = np.unique(keys // 2, return_inverse=True)
        self.pair_occ, self.pair_word = pairs // n_words, pairs % n_words
        self.y = np.zeros((len(pairs), 2), dtype=np.int64)
        self.y[where, keys % 2] = occurrences
        row_words = np.unique(r * n_words + w)
        self.text_rows = row_words // n_words
        self.text_keys = (occ_codes[self.text_rows] * n_words + row_words % n_words) * 2 + (
            side_codes[self.text_rows]
        )
        doc_keys, doc_counts = np.unique(self.text_keys, return_counts=True)
        self.docs = np.zeros_like(self.y)
        self.docs[np.searchsorted(pairs, doc_keys // 2), doc_keys % 2] = doc_counts


def _prior(
    corpus: np.ndarray, general: np.ndarray, cfg: MarkedWordsSettings
) -> tuple[np.ndarray, dict[str, float]]:
    """The prior's word distribution lambda * p_corpus + (1 - lambda) * p_general over the
    vocabulary (sums to 1; a_w = a_0 times it) and the prior's numbers."""
    total = float(corpus.sum())
    p_corpus = corpus / total if total else corpus.astype(float)
    known = general > 0
    weight = cfg.corpus_weight
    if general.sum() > 0:
        p_general = general / general.sum()
    else:  # the general list knows no word of the corpus: the corpus alone
        p_general, weight = np.zeros_like(p_corpus), 1.0
    info = {
        "corpus_weight": weight,
        "corpus_tokens": total,
        "vocabulary": float(len(corpus)),
        "general_coverage": float(corpus[known].sum() / total) if total else 0.0,
    }
    return weight * p_corpus + (1.0 - weight) * p_general, info


def _calibration(
    vocab: np.ndarray, corpus: np.ndarray, general: np.ndarray, cfg: MarkedWordsSettings
) -> tuple[np.ndarray, pd.DataFrame]:
    """Per vocabulary word: removed by calibration? And the table of removed words."""
    with np.errstate(divide="ignore"):
        zipf = np.where(general > 0, np.log10(general) + 9.0, np.nan)
    common = np.nan_to_num(zipf, nan=-np.inf) >= cfg.common_zipf
    top = np.zeros(len(vocab), dtype=bool)
    if cfg.corpus_top and len(vocab):
        order = np.lexsort((vocab.astype(str), -corpus))  # most frequent first, ties by word
        top[order[: cfg.corpus_top]] = True
    removed = common | top
    idx = np.flatnonzero(removed)
    table = pd.DataFrame(
        {
            "word": vocab[idx].astype(str),
            "corpus_count": corpus[idx].astype(np.int64),
            "zipf": zipf[idx],
            "common_english": common[idx],
            "corpus_top": top[idx],
        },
        columns=list(CALIBRATION_COLUMNS),
    )
    table = table.sort_values(["corpus_count", "word"], ascending=[False, True])
    return removed, table.reset_index(drop=True)


def _word_table(
    counts: _Counts,
    kept: np.ndarray,
    z: np.ndarray,
    delta: np.ndarray,
    vocab: np.ndarray,
    occ_names: list[str],
    cfg: MarkedWordsSettings,
    texts: pa.Array,
    ids: np.ndarray,
) -> pd.DataFrame:
    idx = np.flatnonzero(kept)
    side = np.where(z[idx] > 0, 0, 1)
    table = pd.DataFrame(
        {
            "occupation": [occ_names[o] for o in counts.pair_occ[idx]],
            "side": np.asarray(SIDES, dtype=object)[side],
            "word": vocab[counts.pair_word[idx]].astype(str),
            "z": z[idx],
            "log_odds": delta[idx],
            "count_female": counts.y[idx, 0],
            "count_male": counts.y[idx, 1],
            "texts_female": counts.docs[idx, 0],
            "texts_male": counts.docs[idx, 1],
        }
    )
    table["abs_z"] = table["z"].abs()
    table = table.sort_values(
        ["occupation", "side", "abs_z", "word"], ascending=[True, True, False, True]
    )
    table["rank"] = table.groupby(["occupation", "side"]).cumcount() + 1
    examples = _examples(counts, idx, side, cfg.examples)
    rows_of = [examples.get(int(i), []) for i in table.index]
    needed = sorted({r for rows in rows_of for r in rows})
    original = dict(zip(needed, texts.take(pa.array(needed, pa.int64())).to_pylist(), strict=True))
    table["examples"] = [[original[r] for r in rows] for rows in rows_of]
    table["example_ids"] = [[ids[r] for r in rows] for rows in rows_of]
    table = table.drop(columns="abs_z").reset_index(drop=True)
    return table[list(WORD_COLUMNS)]


def _examples(counts: _Counts, idx: np.ndarray, side: np.ndarray, k: int) -> dict[int, list[int]]:
    """Position in ``idx`` -> the first ``k`` rows (input order) of its side with its word."""
    if k == 0 or idx.size == 0:
        return {}
    # the key (occupation * V + word) * 2 + side of each wanted marked word
    wanted = (counts.pair_occ[idx] * counts.n_words + counts.pair_word[idx]) * 2 + side
    hit = np.isin(counts.text_keys, wanted)
    frame = pd.DataFrame({"key": counts.text_keys[hit], "row": counts.text_rows[hit]}).sort_values(
        ["key", "row"], kind="stable"
    )
    first = frame.groupby("key", sort=False).head(k)
    by_key = first.groupby("key", sort=False)["row"].apply(list).to_dict()
    return {pos: by_key.get(int(key), []) for pos, key in enumerate(wanted.tolist())}


def _summary(
    counts: _Counts,
    compared: np.ndarray,
    significant: np.ndarray,
    kept: np.ndarray,
    z: np.ndarray,
    occ_names: list[str],
    alpha0: np.ndarray,
) -> pd.DataFrame:
    n_occ = len(occ_names)

    def per_occ(mask: np.ndarray) -> np.ndarray:
        return np.bincount(counts.pair_occ[mask], minlength=n_occ)

    everything = np.ones(len(z), dtype=bool)
    return pd.DataFrame(
        {
            "occupation": occ_names,
            "texts_female": counts.n_texts[:, 0],
            "texts_male": counts.n_texts[:, 1],
            "tokens_female": counts.n_tokens[:, 0],
            "tokens_male": counts.n_tokens[:, 1],
            "compared": compared,
            "words_compared": per_occ(everything),
            "significant": per_occ(significant),
            "removed_by_calibration": per_occ(significant & ~kept),
            "marked_female": per_occ(kept & (z > 0)),
            "marked_male": per_occ(kept & (z < 0)),
            "prior_strength": alpha0,
        },
        columns=list(SUMMARY_COLUMNS),
    )
