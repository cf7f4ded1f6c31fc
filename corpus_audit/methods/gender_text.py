"""Explicit gender indicators in caption text (METHODS 1.6): the pure matching logic.

A caption is ``male``, ``female``, ``both`` or ``none``; each label comes with its triggers.
Markup is not caption text: HTML entities are decoded and tags (with their attributes, e.g.
the URL of ``<a href=...>``) removed first (:func:`clean_markup`); then


- **words** and **pronouns** from the gender-terms lexicon file (never hard-coded here):
  a caption is lower-cased (Unicode) and split into words, a word being a maximal run of
  letters, digits and ``_`` (the ``\\b`` notion of a word, Unicode-aware). A term matches a
  whole word, so ``herb`` is not ``her`` and ``manager`` is not ``man``, while
  ``woman-owned`` contains ``woman`` and ``man's``, ``women's``, ``ladies'`` contain
  ``man``, ``women``, ``ladies``. Done for a whole batch at once with pyarrow's RE2 kernels.
- **names**: PERSON entities of a spaCy pipeline; the entity's first token is its first
  name, whose gender comes from ``gender-guesser`` (case-sensitive, as the package ships);
  the lexicon's ``[names]`` table says which answers count (by default ``male`` and
  ``mostly_male`` -> male, ``female`` and ``mostly_female`` -> female; ``andy`` and
  ``unknown`` are no indicator and are not recorded).

NER is the slow part (hundreds of captions/s on a CPU core), so :class:`NameFinder` runs it
only on captions where it can produce a name trigger: a name trigger needs a spaCy *token*
whose text gender-guesser maps to a counted answer. :meth:`NameFinder.candidates` is a
cheap vectorised test that is true for every caption holding such a token (a superset, so
the output is identical to running NER on every caption; see ``docs/indicators.md``):

1. the caption split on non-letters (``[^\\p{L}]+``, case kept) has a piece that is such a
   name made only of letters: spaCy's English tokenizer only splits between two letters
   inside a tokenizer special case (``Mayn't`` -> ``May`` + ``n't``), so a letter-only
   token is always a whole letter run;
2. or the caption contains, as a plain substring, a counted name holding a non-letter
   (``Ken'ichi``, ``Abdel-Aziz``) or a special case of the tokenizer with such a name
   among its pieces (``Mayn't``).

The argument holds for spaCy's rule-based tokenizers, whose prefix, suffix and infix rules
split at non-letter characters (tested on 15 k real LAION and COCO captions and on the
tokenizer's special cases); for a pipeline with another tokenizer, check with
``find(texts, prefilter=False)``.

Everything here is pure: no database, no files besides the lexicon and the models it is
given. The stage (``corpus_audit.stages.indicators``) feeds it batches and stores the results.
"""

from __future__ import annotations

import html
import multiprocessing
import os
import re
import signal
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import lru_cache
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.core.errors import ModelError
from corpus_audit.core.model_sources import spacy_source
from corpus_audit.core.versions import package_versions
from corpus_audit.methods.lexicon import GenderTerms, LexiconError

if TYPE_CHECKING:  # heavy imports stay inside functions
    from spacy.language import Language

LABELS = ("male", "female", "both", "none")
GENDERS = ("male", "female")

# A word: a maximal run of letters, digits and underscore (Unicode); split on everything else.
WORD_SPLIT = r"[^\p{L}\p{N}_]+"
# Runs of letters only, for the name prefilter (spaCy splits letter runs only in special cases).
LETTER_SPLIT = r"[^\p{L}]+"


@dataclass(frozen=True)
class Trigger:
    """One token behind an indicator label.

    ``kind`` is ``word``, ``pronoun`` or ``name``; ``token`` the word as matched (lower
    case) or the first name as written; ``gender`` ``male`` or ``female``; ``guess``
    gender-guesser's raw answer for names (``male``, ``mostly_female``...), else ``None``.
    """

    kind: str
    token: str
    gender: str
    guess: str | None = None

    def readable(self) -> str:
        """``woman``, ``his`` or ``name:John(male)`` (the raw guess in brackets)."""
        return f"name:{self.token}({self.guess})" if self.kind == "name" else self.token


def label_of(triggers: Iterable[Trigger]) -> str:
    """``male``, ``female``, ``both`` or ``none`` from the genders of ``triggers``."""
    genders = {t.gender for t in triggers}
    if genders >= {"male", "female"}:
        return "both"
    if genders:
        return next(iter(genders))
    return "none"


def readable(triggers: Sequence[Trigger]) -> str:
    """The triggers as one string, ``'woman; his; name:John(male)'`` ('' when none)."""
    return "; ".join(t.readable() for t in triggers)


def _as_string_array(texts: pa.Array | pa.ChunkedArray | Sequence[str | None]) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), pa.string())
    if pa.types.is_large_string(texts.type) or pa.types.is_string_view(texts.type):
        texts = texts.cast(pa.string())
    if not pa.types.is_string(texts.type):
        raise TypeError(f"captions must be strings, got {texts.type}")
    return texts


# -- markup ---------------------------------------------------------------------------------
# A tag: '<', an optional '/', a tag name, then attributes up to '>'. "<3" or "a < b" are text.
TAG_PATTERN = r"</?[A-Za-z][A-Za-z0-9]*(?:[\s/][^<>]*)?>"


def clean_markup(texts: pa.Array | Sequence[str | None]) -> pa.Array:
    """Captions as text: HTML entities decoded, then HTML tags replaced by a space.

    Scraped captions carry markup (``<a href='...'>``, ``<br>``, ``&quot;``, ``&#39;``,
    escaped tags ``&lt;i&gt;``). Tags and their attributes (URLs) are not caption words, and
    ``Ren&eacute;`` is ``René``. Entities are decoded with :func:`html.unescape` (only on
    captions holding ``&``); tags are removed with one RE2 replace over the batch. Nulls stay
    null. The stored caption is not changed; this is what words and NER see.
    """
    arr = _as_string_array(texts)
    if len(arr) == 0:
        return arr
    amp = pc.fill_null(pc.match_substring(arr, "&"), False).to_numpy(zero_copy_only=False)
    if amp.any():
        values = arr.to_pylist()
        for i in np.flatnonzero(amp).tolist():
            values[i] = html.unescape(values[i])
        arr = pa.array(values, pa.string())
    return pc.replace_substring_regex(arr, TAG_PATTERN, " ")


# -- words and pronouns ---------------------------------------------------------------------
def _split_words(texts: Sequence[str]) -> list[list[str]]:
    """The words of lower-cased ``texts`` (the same split the matcher uses)."""
    arr = pc.utf8_lower(pa.array(list(texts), pa.string()))
    return pc.split_pattern_regex(arr, WORD_SPLIT).to_pylist()


class WordMatcher:
    """Gender words and pronouns of a lexicon, matched per word of the lower-cased caption."""

    def __init__(self, terms: GenderTerms, source: str = "gender terms"):
        kinds: dict[str, tuple[str, str]] = {}
        for kind, table in (("word", terms.words), ("pronoun", terms.pronouns)):
            for gender in GENDERS:
                for term in table[gender]:
                    if _split_words([term]) != [[term]]:
                        raise LexiconError(
                            f"{source}: gender term {term!r} is not one word (letters, digits, _);"
                            " terms are matched against single words of the caption"
                        )
                    kinds.setdefault(term, (kind, gender))
        if not kinds:
            raise LexiconError(f"{source}: no gender words or pronouns")
        self.kinds = kinds
        self._value_set = pa.array(sorted(kinds), pa.string())
        alternation = "|".join(re.escape(t) for t in sorted(kinds, key=len, reverse=True))
        not_word = WORD_SPLIT[:-1]  # one non-word character
        self._any_term = f"(?:^|{not_word})(?:{alternation})(?:{not_word}|$)"

    def match(self, texts: pa.Array | Sequence[str | None]) -> list[list[Trigger]]:
        """Per caption, its word/pronoun triggers: distinct, in order of first appearance.

        Null captions have none. Vectorised: one RE2 match over the batch finds the captions
        holding a term; only those are split into words and looked up.
        """
        arr = _as_string_array(texts)
        out: list[list[Trigger]] = [[] for _ in range(len(arr))]
        if len(arr) == 0:
            return out
        lower = pc.utf8_lower(arr)
        # one RE2 pass finds the captions with any term as a whole word; only those are split
        has = pc.fill_null(pc.match_substring_regex(lower, self._any_term), False)
        picked = np.flatnonzero(has.to_numpy(zero_copy_only=False))
        if picked.size == 0:
            return out
        words = pc.split_pattern_regex(lower.take(pa.array(picked)), WORD_SPLIT)
        flat = pc.list_flatten(words)
        hit = pc.fill_null(pc.is_in(flat, value_set=self._value_set), False)
        rows = picked[pc.list_parent_indices(words).filter(hit).to_numpy()]
        tokens = flat.filter(hit).to_pylist()
        seen: set[tuple[int, str]] = set()
        for row, token in zip(rows.tolist(), tokens, strict=True):
            if (row, token) in seen:
                continue
            seen.add((row, token))
            kind, gender = self.kinds[token]
            out[row].append(Trigger(kind, token, gender))
        return out


# -- names ----------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def gender_detector() -> Any:
    """gender-guesser's detector (case-sensitive, the package default); loaded once."""
    try:
        import gender_guesser.detector as gd
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise ModelError(
            f"gender-guesser is not installed ({exc}); install corpus_audit[text]"
        ) from None
    return gd.Detector()


def gender_guesser_version() -> str:
    return package_versions("gender-guesser").get("gender-guesser", "unknown")


@lru_cache(maxsize=8)
def counted_names(male: tuple[str, ...], female: tuple[str, ...]) -> dict[str, str]:
    """Every name of gender-guesser's data whose answer is in ``male`` or ``female``.

    Returns name -> raw answer. Built once per answer mapping from the detector's own table
    (about 39 k names for the default mapping), so the prefilter and the detector agree.
    """
    detector = gender_detector()
    wanted = set(male) | set(female)
    out = {}
    for name in detector.names:
        guess = detector.get_gender(name)
        if guess in wanted:
            out[name] = guess
    return out


@lru_cache(maxsize=4)
def load_spacy(model: str) -> Language:
    """Load an installed spaCy pipeline by package name or path (once per process); the
    default ``en_core_web_sm`` through :func:`corpus_audit.core.model_sources.spacy_source`.

    Raises :class:`ModelError` when it cannot be loaded or has no ``ner`` component.
    """
    try:
        import spacy
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise ModelError(f"spaCy is not installed ({exc}); install corpus_audit[text]") from None

    source = spacy_source(model)  # the default: the official package, else the pinned copy
    try:
        nlp = spacy.load(source.load)
    except (OSError, ImportError, ValueError) as exc:
        raise ModelError(
            f"indicators.spacy_model: cannot load spaCy pipeline {model!r} ({exc}); "
            "install it (python -m spacy download NAME) or name another one"
        ) from None
    if "ner" not in nlp.pipe_names:
        raise ModelError(f"indicators.spacy_model: pipeline {model!r} has no 'ner' component")
    return nlp


def ner_pipes(nlp: Language) -> list[str]:
    """The components the entities of ``nlp(text)`` depend on, in pipeline order.

    ``ner`` itself; the components that set sentence boundaries (the parser or senter:
    entities never cross a sentence boundary, so dropping the parser changes some spans);
    and the shared embedding layers (``tok2vec``/``transformer``) those components listen
    to. Taggers, lemmatizers and the attribute ruler are left out: the entities with these
    pipes equal those of the full pipeline (tested on real captions).
    """
    names = list(nlp.pipe_names)
    ner_at = names.index("ner")
    keep = {"ner"}
    for name in names[:ner_at]:
        assigns = set(nlp.get_pipe_meta(name).assigns)
        if assigns & {"token.is_sent_start", "doc.sents"}:
            keep.add(name)
    for name in names[:ner_at]:
        listeners = getattr(nlp.get_pipe(name), "listening_components", None) or []
        if set(listeners) & keep:
            keep.add(name)
    return [n for n in names if n in keep]


def _special_case_keys(nlp: Language, names: dict[str, str]) -> list[str]:
    """Tokenizer special cases that split off a counted name (``Mayn't`` -> ``May``)."""
    from spacy.attrs import ORTH

    keys = []
    for key, pieces in nlp.tokenizer.rules.items():
        if len(pieces) < 2:
            continue
        for piece in pieces:
            orth = piece.get(ORTH, piece.get("ORTH"))
            if orth in names:
                keys.append(key)
                break
    return keys


class NameFinder:
    """First names of PERSON entities with a counted gender-guesser answer.

    ``nlp`` is a loaded spaCy pipeline, ``terms`` gives the answer mapping,
    ``batch_size`` is spaCy's ``nlp.pipe`` batch size (texts per forward pass), ``pipes``
    the components to run (default: :func:`ner_pipes`, the same entities as the full
    pipeline).
    """

    def __init__(
        self,
        nlp: Language,
        terms: GenderTerms,
        batch_size: int = 256,
        pipes: Sequence[str] | None = None,
    ):
        self.nlp = nlp
        self.batch_size = batch_size
        self.pool: NerPool | None = None  # set by :meth:`use_processes`
        if pipes:
            unknown = [p for p in pipes if p not in nlp.pipe_names]
            if unknown or "ner" not in pipes:
                raise ModelError(
                    f"indicators.ner_pipes: {list(pipes)} must name components of the pipeline "
                    f"(it has {nlp.pipe_names}) and include 'ner'"
                )
            self.pipes = [p for p in nlp.pipe_names if p in pipes]
        else:
            self.pipes = ner_pipes(nlp)
        self.answer_gender: dict[str, str] = {}
        for gender in GENDERS:
            for answer in terms.name_guesses[gender]:
                self.answer_gender[answer] = gender
        self.names = counted_names(
            tuple(terms.name_guesses["male"]), tuple(terms.name_guesses["female"])
        )
        letters_only = sorted(n for n in self.names if n.isalpha())
        self._letter_names = pa.array(letters_only, pa.string())
        # a spaCy token never contains a space, so names with one can never be a first token
        other = sorted(n for n in self.names if not n.isalpha() and " " not in n)
        literal = other + sorted(_special_case_keys(nlp, self.names))
        self._substring_re = "|".join(re.escape(s) for s in literal) if literal else None
        self.detector = gender_detector()

    def candidates(self, texts: pa.Array | Sequence[str | None]) -> np.ndarray:
        """Boolean mask: True where NER could yield a name trigger (a superset, see module doc)."""
        arr = _as_string_array(texts)
        mask = np.zeros(len(arr), dtype=bool)
        if len(arr) == 0:
            return mask
        runs = pc.split_pattern_regex(arr, LETTER_SPLIT)
        flat = pc.list_flatten(runs)
        hit = pc.fill_null(pc.is_in(flat, value_set=self._letter_names), False)
        rows = pc.list_parent_indices(runs).filter(hit).to_numpy()
        mask[rows] = True
        if self._substring_re is not None:
            sub = pc.fill_null(pc.match_substring_regex(arr, self._substring_re), False)
            mask |= sub.to_numpy(zero_copy_only=False)
        return mask

    def person_triggers(self, doc: Any) -> list[Trigger]:
        """Name triggers of one processed spaCy ``Doc``: distinct, in entity order."""
        out: list[Trigger] = []
        seen: set[str] = set()
        for ent in doc.ents:
            if ent.label_ != "PERSON":
                continue
            first = ent[0].text
            if first in seen:
                continue
            guess = self.detector.get_gender(first)
            gender = self.answer_gender.get(guess)
            if gender is None:
                continue
            seen.add(first)
            out.append(Trigger("name", first, gender, guess))
        return out

    def run_ner(self, texts: Sequence[str]) -> list[list[Trigger]]:
        """Name triggers of every text, running NER on each (batched, NER pipes only).

        With worker processes (:meth:`use_processes`) and at least ``pool.min_texts`` texts,
        the texts are split among the workers; the result is the same, in the same order.
        """
        if self.pool is not None and len(texts) >= self.pool.min_texts:
            return self.pool.run(texts)
        with self.nlp.select_pipes(enable=self.pipes):
            docs = self.nlp.pipe(texts, batch_size=self.batch_size)
            return [self.person_triggers(doc) for doc in docs]

    def use_processes(
        self, model: str, terms: GenderTerms, processes: int, min_texts: int | None = None
    ) -> None:
        """Run NER of calls with >= ``min_texts`` texts (default :data:`NER_PROCESS_MIN_TEXTS`)
        in ``processes`` worker processes, each loading ``model`` (the spec this finder's
        pipeline was loaded from) once. The workers start on the first such call (a few
        seconds: spawn + model load); :meth:`close` stops them."""
        if processes > 1:
            least = NER_PROCESS_MIN_TEXTS if min_texts is None else min_texts
            self.pool = NerPool(model, terms, self.batch_size, self.pipes, processes, least)

    def close(self) -> None:
        """Stop the worker processes, if any."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def find(
        self, texts: pa.Array | Sequence[str | None], *, prefilter: bool = True
    ) -> tuple[list[list[Trigger]], int]:
        """Name triggers per caption, and how many captions went through NER.

        With ``prefilter`` (the default) NER runs only on :meth:`candidates`; the result is
        the same as with ``prefilter=False``, which runs NER on every non-null caption.
        """
        arr = _as_string_array(texts)
        out: list[list[Trigger]] = [[] for _ in range(len(arr))]
        valid = pc.is_valid(arr).to_numpy(zero_copy_only=False)
        mask = self.candidates(arr) & valid if prefilter else valid
        rows = np.flatnonzero(mask)
        if rows.size:
            chosen = arr.take(pa.array(rows)).to_pylist()
            for row, triggers in zip(rows.tolist(), self.run_ner(chosen), strict=True):
                out[row] = triggers
        return out, int(rows.size)


# -- NER in worker processes ------------------------------------------------------------------
# Fewer texts than this in one call run in-process: starting the workers costs seconds, and
# NER does ~600 texts/s per core.
NER_PROCESS_MIN_TEXTS = 1000
_WORKER_FINDER: NameFinder | None = None  # the finder of a worker process (see NerPool)


def _init_ner_worker(model: str, terms: GenderTerms, batch_size: int, pipes: list[str]) -> None:
    # Ctrl-C reaches the whole process group: the main process decides how to stop (it rolls
    # back the batch in flight and shuts the pool down), so a worker does not die mid-chunk.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # one process per core: no BLAS threads on top
    global _WORKER_FINDER
    _WORKER_FINDER = NameFinder(load_spacy(model), terms, batch_size, pipes)


def exit_with_parent() -> None:
    """In a ``spawn`` worker process: exit as soon as the parent process dies, however it died.

    A worker blocked on the pool's task queue never sees EOF there when its parent is killed
    (it holds that pipe's write end itself), so without this a SIGKILLed ``indicators`` left
    its spaCy workers (~730 MB each) running for good. ``multiprocessing`` gives every spawn
    child a *parent sentinel*, the read end of a pipe whose only write end the parent holds:
    it becomes readable when the parent exits. A daemon thread waits on it and ends the
    process (``os._exit``: nothing to flush, the parent rolled back or lost the batch).
    """
    parent = multiprocessing.parent_process()
    if parent is None:  # not a multiprocessing child
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _run_ner_worker(texts: list[str]) -> list[list[Trigger]]:
    assert _WORKER_FINDER is not None, "worker not initialised"
    return _WORKER_FINDER.run_ner(texts)


class NerPool:
    """spaCy NER over ``processes`` worker processes (``spawn``: no fork of a process that
    holds DuckDB and other threads), each with its own copy of the pipeline ``model``.

    spaCy's pipelines run on one core each; two processes on two cores nearly halve the NER
    time of a large batch. A text's entities do not depend on the other texts of its batch,
    so the result equals the in-process one (tested). Texts go out in chunks of
    ``4 * batch_size`` and come back in order.
    """

    def __init__(
        self,
        model: str,
        terms: GenderTerms,
        batch_size: int,
        pipes: Sequence[str],
        processes: int,
        min_texts: int = NER_PROCESS_MIN_TEXTS,
    ):
        self.args = (model, terms, batch_size, list(pipes))
        self.processes = processes
        self.min_texts = min_texts
        self.chunk = max(1, 4 * batch_size)
        self._executor: Any = None

    def run(self, texts: Sequence[str]) -> list[list[Trigger]]:
        chunks = [list(texts[i : i + self.chunk]) for i in range(0, len(texts), self.chunk)]
        out: list[list[Trigger]] = []
        try:
            for part in self._pool().map(_run_ner_worker, chunks):
                out.extend(part)
        except BrokenProcessPool as exc:
            self.close()
            raise ModelError(
                f"indicators: a NER worker process died ({exc}); set indicators.ner_processes "
                "= 1 to run NER in the main process"
            ) from None
        return out

    def _pool(self) -> Any:
        if self._executor is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._executor = ProcessPoolExecutor(
                self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_ner_worker,
                initargs=self.args,
            )
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


# -- both together --------------------------------------------------------------------------
@dataclass
class LabelledBatch:
    """Labels and triggers of a batch of captions, aligned with the input order."""

    labels: list[str]
    triggers: list[list[Trigger]]
    distinct_texts: int  # distinct caption texts in the batch (each processed once)
    ner_texts: int  # distinct texts that went through NER


class IndicatorTagger:
    """Words, pronouns and (optionally) names together; one call per batch of captions."""

    def __init__(self, words: WordMatcher, names: NameFinder | None = None):
        self.words = words
        self.names = names

    def close(self) -> None:
        """Stop the name finder's worker processes, if any."""
        if self.names is not None:
            self.names.close()

    def tag(
        self, texts: pa.Array | Sequence[str | None], *, prefilter: bool = True
    ) -> LabelledBatch:
        """Label every caption; identical captions are processed once (dictionary-encoded).

        Captions are cleaned of markup first (:func:`clean_markup`).
        """
        arr = _as_string_array(texts)
        encoded = pc.dictionary_encode(arr)
        uniques = clean_markup(encoded.dictionary)
        valid = pc.is_valid(encoded.indices).to_numpy(zero_copy_only=False)
        index = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
        per_text = self.words.match(uniques)
        ner_count = 0
        if self.names is not None:
            names, ner_count = self.names.find(uniques, prefilter=prefilter)
            per_text = [w + n for w, n in zip(per_text, names, strict=True)]
        labels_u = [label_of(t) for t in per_text]
        labels, triggers = [], []
        for i in range(len(arr)):
            if valid[i]:
                labels.append(labels_u[index[i]])
                triggers.append(per_text[index[i]])
            else:
                labels.append("none")
                triggers.append([])
        return LabelledBatch(labels, triggers, len(uniques), ner_count)
