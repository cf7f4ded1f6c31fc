"""Caption-side stereotype score: PST roles with a gender attached to them in corpus captions.

Does the corpus itself draw the roles the stereotyped way? A caption that names a PST role
*and* attaches a gender to that role ("a female doctor", "the nurse, a woman", "a farmer
clears his field") is the text analogue of a labelled person: the role's corpus %female and
Stereotype Score come from these attachments, and captions that name two roles give the
corpus-side paired score, comparable with the generated images' (:mod:`corpus_audit.methods.pst.score`).

**Mentions.** Roles and their surface forms come from the PST roles file
(:func:`corpus_audit.methods.lexicon.pst.load_roles`); a spaCy pipeline (default
``en_core_web_sm``: tagger, parser, NER) parses the captions that contain a form
(an RE2 prefilter over the lower-cased caption, after HTML markup is removed as in
:func:`corpus_audit.methods.gender_text.clean_markup`). A mention is the longest form matched
(``PhraseMatcher`` on lower case: "construction worker" beats "worker", "chief executive"
beats "chief") whose head token is a noun (``NOUN``/``PROPN``: "they cook" is no cook), is
not inside a named entity ("Karen Carpenter", "The Cook Shop"), and, when it modifies another
word (``compound``/``amod``/``nmod``), modifies a PERSON name ("designer Frederick Rice")
rather than a thing ("designer handbags", "assistant manager").

**Attachment rules** (a mention collects every gender the rules give; one gender -> that
gender, both -> ``both``, none -> ``none``). The gender words and pronouns are the lexicon's
(``gender_terms_en.toml``: woman, men, lady, girls...; he, his, she, her...).

1. ``lexical``: the form carries the gender itself (``male_forms``/``female_forms`` of the
   roles file: salesman, saleswoman, seamstress, foreman, cleaning lady).
2. ``modifier``: a gender word is a direct ``amod``/``compound``/``nmod`` dependent of the role
   ("female doctor", "a woman nurse", "women workers"), or a conjunct of one ("male and female
   nurses" -> both). A gender *noun* must stand right before the role: the small model parses
   compound chains flat, so "boy scout leader" makes "boy" a dependent of "leader" (the cost:
   "a woman office worker" is missed; the adjective in "a female office worker" is not). A
   possessive gender word is not the role's gender ("women's clothing designer": dependency
   ``poss`` or a ``case`` marker).
3. ``predicate``: the role and a gender word (or a gendered pronoun subject) are the same
   person by apposition ("the nurse, a woman,") or by a copula ("she is a nurse", "the doctor
   is a woman").
4. ``name``: the role titles or is in apposition with a PERSON entity ("CEO Tim Cook", "Garden
   designer Frederick Rice", "HR Contempo's CEO, Betsy Irizarry", "Mary is a nurse"); the
   gender is the first name's, by gender-guesser with the lexicon's answer mapping, as the
   indicator rules of METHODS 1.6 do.
5. ``pronoun`` (a binding approximation: the small model has no coreference). A gendered
   pronoun refers to the role when, walking up the dependency tree from the pronoun within its
   sentence, the first person met is the role: either the pronoun sits inside the role's own
   phrase ("organization leader and his mother", "a crossing guard getting off his bike"), or
   the nearest clause above it has the role (or the name the role titles) as its subject ("a
   farmer clears away grass from his wheat fields", "Garden designer Frederick Rice says he
   has invested"). A subject that is the same-gender pronoun is passed through ("he ... his");
   a relative pronoun (who, that) is transparent ("a nurse who lost her job"); any other person
   met first (a gender word, another role, a name, one of the 62 occupations of the main
   lexicon, a pronoun of the other gender) ends the walk with no attachment. The role must be
   singular, and no other singular person that could take the pronoun may come before it in
   the sentence (another role or occupation, a gender noun of the pronoun's gender, a name of
   that gender or of unknown gender): "the woman's hairdresser styling her hair" gives the
   hairdresser nothing. A possessive pronoun is **not** the gender of the noun it qualifies: "his
   secretary" says the possessor is a man; the walk goes on from that noun, so "the CEO and
   his secretary" gives the CEO a man and the secretary nothing, and "the teacher and her
   students" gives the teacher a woman.
   Known misses: a pronoun in another sentence of the caption; an antecedent that is an object
   or a person noun outside the lexicons ("a nurse helps a patient with his walker" gives the
   nurse a man).

**Units.** :meth:`CaptionRoleTagger.tag` gives one row per mention; the scores count one unit
per (caption, role) (:func:`caption_roles`): the genders of all mentions of the role in the
caption together ("guard Chris Warren and guard Zach Graham" is one male guard; a female and
a male nurse is ``both``). A plural mention is one unit ("three female workers"). A caption
with at least two *different* roles is ``paired``, else ``single``. Captions that are null or not UTF-8 (counted
by the corpus reader) are skipped.

Scores reuse :mod:`corpus_audit.methods.pst.score` with the caption as the unit (``caption_id``):
Stereo over mentions whose gender is ``male``/``female`` (``both``/``none`` left out), SS per
role / stereotype / overall, single vs paired and the gap, PST-Both/Any over paired captions,
and the corpus %female per role next to the labour statistics.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.core.errors import ModelError
from corpus_audit.methods.gender_text import clean_markup, gender_detector, load_spacy
from corpus_audit.methods.lexicon import GenderTerms, Occupation, load_occupations
from corpus_audit.methods.lexicon.pst import GENDERS, PstRole
from corpus_audit.methods.pst.score import (
    Bootstrap,
    labor_comparison,
    labor_correlation,
    pst_both_any,
    score_summary,
    single_vs_paired,
    stereotype_score,
)

if TYPE_CHECKING:
    from corpus_audit.methods.pst.score import Bootstrap

DEFAULT_SPACY_MODEL = "en_core_web_sm"
RULES = ("lexical", "modifier", "predicate", "name", "pronoun")
MODIFIER_DEPS = ("amod", "compound", "nmod")
SUBJECT_DEPS = ("nsubj", "nsubjpass")
NAMED_ENTITY_TYPES = ("PERSON", "ORG", "FAC", "GPE", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW")
RELATIVE_TAGS = ("WP", "WDT")
PLURAL_TAGS = ("NNS", "NNPS")
_SEP = "\x1f"
_NOT = "\x1fnot"  # matcher key of phrases that are not a role (roles file: not_forms)

# Columns of CaptionRoleTagger.tag(): one row per role mention.
MENTION_COLUMNS = (
    "caption_id",  # the caller's id of the caption (corpus: (file_id << 40) | row_in_file)
    "mention",  # 0-based order of the mention in the caption
    "role",  # PST role key
    "stereotype",  # male | female: the role's stereotyped gender
    "text",  # the words matched, as written
    "plural",  # the role noun is plural (tag NNS/NNPS)
    "gender",  # attached gender: male | female | both | none
    "rules",  # the rules that attached it, '; '-joined in RULES order ('' when none)
    "triggers",  # the words behind them, e.g. 'female; his' ('' when none)
)
# Columns of caption_roles(): one row per (caption, role), the unit of the scores.
CAPTION_ROLE_COLUMNS = (
    "caption_id",
    "role",
    "stereotype",
    "n_mentions",  # mentions of the role in the caption
    "gender",  # male | female | both | none: the genders of all its mentions together
    "rules",  # '; '-joined, RULES order
    "triggers",  # '; '-joined, in mention order
    "n_roles",  # distinct PST roles the caption mentions
    "pairing",  # single | paired (n_roles >= 2)
)
# Columns of role_table(): one row per role.
ROLE_SCORE_COLUMNS = (
    "role",
    "stereotype",
    "n_captions",  # captions mentioning the role (its (caption, role) rows)
    "n_mentions",
    "n_female",  # captions whose mentions of the role are female
    "n_male",
    "n_both",  # captions with both genders attached to the role (left out of %female and SS)
    "percent_female",  # 100 x n_female / (n_female + n_male), 0-100
    "ci_low",  # Wilson 95 %
    "ci_high",
    "ss",  # Stereotype Score over the gendered mentions, -100..100
    "labor_percent_female",  # labour statistics, 0-100
)


@dataclass
class _Mention:
    role: PstRole
    head: Any  # spaCy Token
    start: int  # index of the mention's first token
    text: str
    lexical: str | None  # gender carried by the form itself
    found: list[tuple[str, str, str]] = field(default_factory=list)  # (gender, rule, trigger)


class CaptionRoleTagger:
    """Find PST role mentions and the genders attached to them (module docstring).

    ``roles``: the PST roles; ``terms``: gender words and pronouns; ``occupations``: other
    person nouns that end a pronoun's walk (default: the main lexicon's 62 occupations);
    ``spacy_model``: an installed pipeline with tagger, parser and NER; ``batch_size``: texts
    per ``nlp.pipe`` batch (>= 1).
    """

    def __init__(
        self,
        roles: Sequence[PstRole],
        terms: GenderTerms,
        *,
        occupations: Sequence[Occupation] | None = None,
        spacy_model: str = DEFAULT_SPACY_MODEL,
        batch_size: int = 256,
    ) -> None:
        from spacy.matcher import PhraseMatcher

        self.nlp = load_spacy(spacy_model)
        if "parser" not in self.nlp.pipe_names:
            raise ModelError(f"{spacy_model}: the caption score needs a dependency parser")
        self.spacy_model = spacy_model
        self.batch_size = max(1, int(batch_size))
        self.roles = {r.name: r for r in roles}
        self.words = {w: g for g in GENDERS for w in terms.words[g]}
        self.pronouns = {w: g for g in GENDERS for w in terms.pronouns[g]}
        self.answer_gender = {a: g for g in GENDERS for a in terms.name_guesses[g]}
        if occupations is None:
            occupations = load_occupations()
        role_forms = {f for r in roles for f in r.forms}
        self.other_persons = {f for o in occupations for f in o.forms if " " not in f} - role_forms
        self.matcher = PhraseMatcher(self.nlp.vocab, attr="LOWER")
        forms: list[str] = []
        for role in roles:
            keys = [(role.name, role.forms)] + [
                (f"{role.name}{_SEP}{g}", fs) for g, fs in role.gendered_forms.items()
            ]
            if role.not_forms:  # matched so that the longest-span rule removes the role word
                self.matcher.add(_NOT, [self.nlp.make_doc(f) for f in role.not_forms])
            for key, fs in keys:
                self.matcher.add(key, [self.nlp.make_doc(f) for f in fs])
                forms.extend(fs)
        alternation = "|".join(re.escape(f) for f in sorted(set(forms), key=len, reverse=True))
        self._prefilter = rf"(?:^|[^\p{{L}}])(?:{alternation})(?:$|[^\p{{L}}])"

    # -- prefilter and parse ------------------------------------------------------------------
    def candidates(self, texts: pa.Array) -> np.ndarray:
        """Boolean mask of the (clean) captions that contain a role form as a letter run."""
        if len(texts) == 0:
            return np.zeros(0, dtype=bool)
        hit = pc.match_substring_regex(pc.utf8_lower(texts), self._prefilter)
        return pc.fill_null(hit, False).to_numpy(zero_copy_only=False)

    def tag(self, texts: Sequence[str | None] | pa.Array, ids: Sequence[int]) -> pd.DataFrame:
        """Mention rows (:data:`MENTION_COLUMNS`) of ``texts``; ``ids[i]`` is text i's
        caption id. Null captions give nothing."""
        clean = clean_markup(texts)
        return self.tag_clean(clean, ids, self.candidates(clean))

    def tag_clean(self, clean: pa.Array, ids: Sequence[int], mask: np.ndarray) -> pd.DataFrame:
        """:meth:`tag` of captions already cleaned of markup, parsing those in ``mask``."""
        if len(clean) != len(ids) or len(mask) != len(ids):
            raise ValueError("texts, ids and mask differ in length")
        rows_idx = np.flatnonzero(mask)
        chosen = clean.take(pa.array(rows_idx, pa.int64())).to_pylist() if rows_idx.size else []
        rows: list[tuple] = []
        docs = self.nlp.pipe(chosen, batch_size=self.batch_size)
        for i, doc in zip(rows_idx.tolist(), docs, strict=True):
            rows.extend(self.doc_rows(doc, ids[i]))
        return pd.DataFrame(rows, columns=list(MENTION_COLUMNS))

    def doc_rows(self, doc: Any, caption_id: Any) -> list[tuple]:
        """Mention rows of one parsed caption."""
        mentions = self.mentions(doc)
        if not mentions:
            return []
        persons = {t.i: ent for ent in doc.ents if ent.label_ == "PERSON" for t in ent}
        clusters = self._clusters(mentions, persons)
        for m in mentions:
            self._local_rules(m, persons)
        for token in doc:
            gender = self.pronouns.get(token.lower_)
            if gender is None:
                continue
            owner = self._bind(token, gender, clusters, persons)
            if (
                owner is not None
                and owner.head.tag_ not in PLURAL_TAGS
                and not self._rival(token, gender, owner, clusters, persons)
            ):
                owner.found.append((gender, "pronoun", token.text))
        out = []
        for index, m in enumerate(mentions):
            genders = {g for g, _, _ in m.found}
            gender = "both" if len(genders) == 2 else (genders.pop() if genders else "none")
            order = sorted(m.found, key=lambda f: RULES.index(f[1]))
            out.append(
                (
                    caption_id, index, m.role.name, m.role.stereotype, m.text,
                    m.head.tag_ in PLURAL_TAGS, gender,
                    "; ".join(dict.fromkeys(r for _, r, _ in order)),
                    "; ".join(dict.fromkeys(t for _, _, t in order)),
                )
            )  # fmt: skip
        return out

    # -- mentions -----------------------------------------------------------------------------
    def mentions(self, doc: Any) -> list[_Mention]:
        """The role mentions of a parsed caption, in text order (module docstring)."""
        from spacy.tokens import Span
        from spacy.util import filter_spans

        spans = [
            Span(doc, start, end, label=self.nlp.vocab.strings[match_id])
            for match_id, start, end in self.matcher(doc)
        ]
        out = []
        for span in sorted(filter_spans(spans), key=lambda s: s.start):
            if span.label_ == _NOT:
                continue
            head = span.root
            if head.pos_ not in ("NOUN", "PROPN") or head.ent_type_ in NAMED_ENTITY_TYPES:
                continue
            if head.dep_ in MODIFIER_DEPS and head.head.ent_type_ != "PERSON":
                continue
            role, _, gender = span.label_.partition(_SEP)
            out.append(_Mention(self.roles[role], head, span.start, span.text, gender or None))
        return out

    @staticmethod
    def _clusters(mentions: list[_Mention], persons: dict[int, Any]) -> dict[int, _Mention]:
        """Token index -> mention, for the role's head and the PERSON name it titles."""
        out: dict[int, _Mention] = {}
        for m in mentions:
            out[m.head.i] = m
            for ent in _linked_people(m.head, persons):
                for t in ent:
                    out.setdefault(t.i, m)
        return out

    # -- rules 1-4 ----------------------------------------------------------------------------
    def _word_gender(self, token: Any) -> str | None:
        """Gender of a gender word used as a plain (not possessive) noun or adjective."""
        if token.dep_ == "poss" or any(c.dep_ == "case" for c in token.children):
            return None
        return self.words.get(token.lower_)

    def _name_gender(self, ent: Any) -> str | None:
        return self.answer_gender.get(gender_detector().get_gender(ent[0].text))

    def _local_rules(self, m: _Mention, persons: dict[int, Any]) -> None:
        h = m.head
        if m.lexical:
            m.found.append((m.lexical, "lexical", m.text))
        for child in h.children:
            if child.dep_ not in MODIFIER_DEPS:
                continue
            # a gender noun must stand right before the role ("woman nurse"), so that in a flat
            # compound chain it cannot qualify another word ("boy scout leader"); adjectives
            # may stand further ("female office worker")
            adjacent = child.right_edge.i == m.start - 1
            for word in (child, *child.conjuncts):
                gender = self._word_gender(word)
                if gender and (adjacent or word.pos_ == "ADJ" or word.dep_ == "amod"):
                    m.found.append((gender, "modifier", word.text))
        for other in _same_person(h):
            gender = self._word_gender(other) or (
                self.pronouns.get(other.lower_) if other.dep_ in SUBJECT_DEPS else None
            )
            if gender:
                m.found.append((gender, "predicate", other.text))
        for ent in _linked_people(h, persons):
            gender = self._name_gender(ent)
            if gender:
                m.found.append((gender, "name", ent.text))

    # -- rule 5 -------------------------------------------------------------------------------
    def _is_person(self, token: Any, persons: dict[int, Any]) -> bool:
        low = token.lower_
        return (
            token.i in persons
            or low in self.words
            or low in self.other_persons
            or (low in self.pronouns and token.dep_ != "poss")
        )

    def _rival(
        self,
        pronoun: Any,
        gender: str,
        owner: _Mention,
        clusters: dict[int, _Mention],
        persons: dict[int, Any],
    ) -> bool:
        """Whether another singular person that could take the pronoun precedes it in its
        sentence: another role, an occupation of the main lexicon, a gender noun of the
        pronoun's gender, or a name whose gender is the pronoun's or unknown."""
        for token in pronoun.sent:
            if token.i >= pronoun.i:
                return False
            if clusters.get(token.i) is owner or token.tag_ in PLURAL_TAGS:
                continue
            if token.i in clusters and token.i == clusters[token.i].head.i:
                return True
            ent = persons.get(token.i)
            if ent is not None:
                if token.i == ent.root.i and self._name_gender(ent) in (None, gender):
                    return True
                continue
            if token.pos_ not in ("NOUN", "PROPN") or token.dep_ in MODIFIER_DEPS:
                continue
            if self.words.get(token.lower_) == gender or token.lower_ in self.other_persons:
                return True
        return False

    def _bind(
        self, pronoun: Any, gender: str, clusters: dict[int, _Mention], persons: dict[int, Any]
    ) -> _Mention | None:
        """The mention a gendered pronoun refers to by the walk of rule 5, or None."""
        node = pronoun
        while node.head.i != node.i:
            came_from, node = node, node.head
            if pronoun.dep_ == "poss" and pronoun.head.i == node.i:
                continue  # "his secretary", "her students": the possessor is someone else
            owner = clusters.get(node.i)
            if owner is not None:
                return owner
            if self._is_person(node, persons):
                return None  # inside another person's phrase
            for subject in node.children:
                if subject.dep_ not in SUBJECT_DEPS or subject.i in (came_from.i, pronoun.i):
                    continue
                owner = clusters.get(subject.i)
                if owner is not None:
                    return owner
                if subject.tag_ in RELATIVE_TAGS:
                    continue  # "a nurse who lost her job": look further up
                if self.pronouns.get(subject.lower_) == gender:
                    continue  # "he ... his": the same person again
                return None
        return None


def _linked_people(head: Any, persons: dict[int, Any]) -> list[Any]:
    """PERSON entities the role titles (compound/nmod of a name) or is in apposition or
    copula with."""
    out = []
    if head.dep_ in (*MODIFIER_DEPS, "appos") and head.head.i in persons:
        out.append(persons[head.head.i])
    for other in (*(c for c in head.children if c.dep_ == "appos"), *_copula_partners(head)):
        if other.i in persons:
            out.append(persons[other.i])
    unique = {ent.start: ent for ent in out}
    return list(unique.values())


def _copula_partners(head: Any) -> list[Any]:
    """The other side of ``X is a Y`` for a role that is its attribute or its subject."""
    verb = head.head
    if verb.lemma_ != "be" or verb.i == head.i:
        return []
    if head.dep_ == "attr":
        return [c for c in verb.children if c.dep_ in SUBJECT_DEPS]
    if head.dep_ in SUBJECT_DEPS:
        return [c for c in verb.children if c.dep_ == "attr"]
    return []


def _same_person(head: Any) -> list[Any]:
    """Tokens that denote the role's person: appositions and copula partners."""
    appos = [c for c in head.children if c.dep_ == "appos"]
    if head.dep_ == "appos":
        appos.append(head.head)
    return appos + _copula_partners(head)


# -- corpora ----------------------------------------------------------------------------------
def tag_files(
    files: Iterable[tuple[str, int, Iterable[Any]]],
    tagger: CaptionRoleTagger,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mention rows of every caption of the corpus ``files``, and one row per file: ``file``,
    ``rows``, ``null_text`` (null or non-UTF-8 captions), ``candidates`` (captions parsed),
    ``mentions``.

    ``files`` yields ``(name, file_id, batches)``; each batch has ``table`` (Arrow, columns
    ``row_in_file`` and ``text``), ``rows``, ``null_text`` and ``bad_text`` (as
    :func:`corpus_audit.backends.corpus.read_file` gives them; the stage reads the corpus,
    :func:`corpus_audit.stages.pst_captions.tag_corpus`). Caption ids are
    ``(file_id << 40) | row_in_file`` as in the study."""
    frames, stats = [], []
    for name, file_id, batches in files:
        n_rows = n_null = n_cand = n_mentions = 0
        for batch in batches:
            rows = batch.table.column("row_in_file").to_numpy()
            clean = clean_markup(batch.table.column("text"))
            mask = tagger.candidates(clean)
            n_rows += batch.rows
            n_null += batch.null_text + batch.bad_text
            n_cand += int(mask.sum())
            found = tagger.tag_clean(clean, [(file_id << 40) | int(r) for r in rows], mask)
            n_mentions += len(found)
            frames.append(found)
        stats.append((name, n_rows, n_null, n_cand, n_mentions))
    mentions = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=list(MENTION_COLUMNS))
    )
    return mentions, pd.DataFrame(
        stats, columns=["file", "rows", "null_text", "candidates", "mentions"]
    )


# -- scores -----------------------------------------------------------------------------------
def _joined(values: pd.Series) -> str:
    parts = [p for v in values for p in str(v).split("; ") if p]
    return "; ".join(dict.fromkeys(parts))


def caption_roles(mentions: pd.DataFrame) -> pd.DataFrame:
    """One row per (caption, role) (:data:`CAPTION_ROLE_COLUMNS`): the genders of the role's
    mentions in the caption together ("guard Chris Warren and guard Zach Graham": one male
    guard; a female and a male nurse: ``both``), and whether the caption pairs two roles."""
    if mentions.empty:
        return pd.DataFrame(columns=list(CAPTION_ROLE_COLUMNS))
    g = mentions.groupby(["caption_id", "role", "stereotype"], sort=False)
    out = g.agg(
        n_mentions=("mention", "size"),
        has_female=("gender", lambda s: bool(s.isin(["female", "both"]).any())),
        has_male=("gender", lambda s: bool(s.isin(["male", "both"]).any())),
        rules=("rules", _joined),
        triggers=("triggers", _joined),
    ).reset_index()
    out["gender"] = [
        "both" if f and m else "female" if f else "male" if m else "none"
        for f, m in zip(out["has_female"], out["has_male"], strict=True)
    ]
    out["rules"] = ["; ".join(r for r in RULES if r in rules.split("; ")) for rules in out["rules"]]
    out["n_roles"] = out.groupby("caption_id")["role"].transform("size")
    out["pairing"] = ["paired" if n >= 2 else "single" for n in out["n_roles"]]
    return out[list(CAPTION_ROLE_COLUMNS)]


def caption_people(roles: pd.DataFrame, *, split: bool = True) -> pd.DataFrame:
    """(caption, role) rows as person rows for :mod:`corpus_audit.methods.pst.score`: unit
    ``caption_id``, ``kind`` = the caption's pairing (``single``/``paired``; ``corpus`` for all
    when not ``split``), ``variant`` = ``plain``, ``perceived`` = the attached gender."""
    out = roles[["caption_id", "role", "stereotype", "gender"]].rename(
        columns={"gender": "perceived"}
    )
    out.insert(1, "kind", roles["pairing"].to_numpy() if split else "corpus")
    out.insert(2, "variant", "plain")
    return out.reset_index(drop=True)


def role_table(roles: pd.DataFrame, labor: dict[str, float | None]) -> pd.DataFrame:
    """Per role, over its (caption, role) rows (:func:`caption_roles`): attached genders,
    corpus %female (Wilson), SS and the labour statistic (:data:`ROLE_SCORE_COLUMNS`), roles
    in stereotype (male first) then name order."""
    people = caption_people(roles, split=False)
    if people.empty:
        return pd.DataFrame(columns=list(ROLE_SCORE_COLUMNS))
    pf = labor_comparison(people, labor)
    ss = stereotype_score(people, ("role",), unit="caption_id", bootstrap=Bootstrap(replicates=0))
    counts = roles.groupby("role").agg(
        n_captions=("caption_id", "size"),
        n_mentions=("n_mentions", "sum"),
        n_both=("gender", lambda g: int((g == "both").sum())),
    )
    out = pf.merge(counts, left_on="role", right_index=True).merge(ss[["role", "ss"]], on="role")
    out = out.sort_values(["stereotype", "role"], ascending=[False, True])
    return out[list(ROLE_SCORE_COLUMNS)].reset_index(drop=True)


@dataclass
class CaptionScores:
    """Every caption-side result of a set of mention rows.

    ``caption_roles`` (:data:`CAPTION_ROLE_COLUMNS`); ``roles`` (:data:`ROLE_SCORE_COLUMNS`);
    ``summary`` (:data:`corpus_audit.methods.pst.score.SCORE_COLUMNS`; kind ``corpus`` = every
    caption, ``single`` / ``paired`` = captions naming one / two or more roles); ``gap``
    (``GAP_COLUMNS``, paired vs single captions); ``both_any`` (``BOTH_ANY_COLUMNS`` over
    paired captions); ``correlation`` (``CORRELATION_COLUMNS``: corpus %female per role vs
    the labour statistics, kind ``corpus``).
    """

    caption_roles: pd.DataFrame
    roles: pd.DataFrame
    summary: pd.DataFrame
    gap: pd.DataFrame
    both_any: pd.DataFrame
    correlation: pd.DataFrame


def caption_scores(
    mentions: pd.DataFrame, labor: dict[str, float | None], *, bootstrap: Bootstrap | None = None
) -> CaptionScores:
    """All caption-side scores of mention rows (:meth:`CaptionRoleTagger.tag` /
    :func:`tag_files`); bootstrap intervals (default :class:`~corpus_audit.methods.pst.score.Bootstrap`:
    1000 replicates, seed 0, 95 %) resample captions."""
    options: dict[str, Any] = {"unit": "caption_id", "bootstrap": bootstrap or Bootstrap()}
    roles = caption_roles(mentions)
    whole = caption_people(roles, split=False)
    split = caption_people(roles)
    return CaptionScores(
        roles,
        role_table(roles, labor),
        pd.concat(
            [score_summary(whole, **options), score_summary(split, **options)], ignore_index=True
        ),
        single_vs_paired(split, **options),
        pst_both_any(split, **options),
        labor_correlation(labor_comparison(whole, labor)),
    )
