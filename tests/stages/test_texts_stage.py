"""The ``who_how`` stage and ``corpus-audit texts`` on the real captions in ../shared/data.

Two studies shared by the module:

- a caption study of the three real corpora (LAION 10 k sample, COCO val2017, CC3M
  validation) after ``select`` and ``indicators`` (no spaCy names), then ``who_how``;
- a text-corpus study made by ``corpus-audit texts`` from one parquet of all 50,847 captions
  with a gender column (the gender a caption's gender *words* state).

Expected values are computed here with plain Python (the helpers of test_texts_real.py:
``re``, ``html``, ``Counter``, ``math``) and numpy/scipy, never by the stage's own code.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_texts_real import CORPORA, py_association, py_marked_words, py_words

from corpus_audit.cli import main
from corpus_audit.core.store import Study
from corpus_audit.methods.lexicon import load_association_terms, load_gender_terms, load_occupations


def cli(*argv: str) -> int:
    return main(["-q", *argv])


@pytest.fixture(scope="module")
def caption_study(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators
    from corpus_audit.stages.select import select

    root = tmp_path_factory.mktemp("who_how") / "study"
    study = init_study(
        root,
        [str(shared_data / name) for name, _ in CORPORA],
        overrides={"indicators": {"use_names": False}},
    )
    with study:
        select(study, progress=False)
        indicators(study, progress=False)
    assert cli("who_how", str(root)) == 0
    return root


def gender_of(text: str | None, words: dict[str, set[str]]) -> str:
    """female / male when the text holds gender words of that gender only, else empty."""
    found = {g for g, ws in words.items() if ws & set(py_words(text))}
    return found.pop() if len(found) == 1 else ""


@pytest.fixture(scope="module")
def corpus_file(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All 50,847 captions in one parquet: ``text`` and ``gender`` (from gender words)."""
    terms = load_gender_terms()
    words = {g: set(terms.words[g]) for g in ("female", "male")}
    assert all(" " not in w for ws in words.values() for w in ws)  # one-word terms only
    texts: list[str | None] = []
    for name, column in CORPORA:
        texts += pq.read_table(shared_data / name, columns=[column]).column(column).to_pylist()
    assert len(texts) == 50_847
    path = tmp_path_factory.mktemp("who_how_corpus") / "captions.parquet"
    genders = [gender_of(t, words) for t in texts]
    pq.write_table(pa.table({"text": texts, "gender": genders}), path)
    return path


@pytest.fixture(scope="module")
def corpus_study(corpus_file: Path) -> Path:
    out = corpus_file.parent / "texts_study"
    assert cli("texts", str(corpus_file), "--out", str(out), "--gender-column", "gender") == 0
    return out


def query(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    with Study.open(root, read_only=True) as study:
        return study.con.execute(sql, params or []).fetchall()


# -- captions ---------------------------------------------------------------------------------
def test_caption_associations_equal_an_independent_count(caption_study):
    terms = load_association_terms()
    rows = query(
        caption_study,
        "SELECT c.text, a.female_pronouns, a.male_pronouns, a.neutral_pronouns, "
        "a.female_honorifics, a.male_honorifics, a.non_binary_terms, a.association "
        "FROM captions c LEFT JOIN texts_associations a ON a.text_id = c.caption_id",
    )
    assert len(rows) > 800
    for text, *counts, association in rows:
        assert (tuple(counts), association) == py_association(text, terms), text


def test_caption_who_equals_independent_counts(caption_study):
    """Specified: the caption's gender words (one gender only); associated: the rule."""
    terms = load_association_terms()
    gender = load_gender_terms()
    words = {g: set(gender.words[g]) for g in ("female", "male")}
    mentions = query(
        caption_study,
        "SELECT DISTINCT m.occupation, c.caption_id, c.text FROM mentions m "
        "JOIN captions c USING (caption_id)",
    )
    expected: dict[tuple[str, str], Counter] = {}
    for occupation, _, text in mentions:
        spec = gender_of(text, words) or "none"
        assoc = py_association(text, terms)[1]
        expected.setdefault(("association", occupation), Counter())[assoc] += 1
        expected.setdefault(("specified", occupation), Counter())[spec] += 1
    got = query(caption_study, "SELECT labels, occupation, texts, female, male FROM texts_who")
    assert len(got) == len(expected)
    for labels, occupation, texts, female, male in got:
        counts = expected[labels, occupation]
        assert (texts, female, male) == (counts.total(), counts["female"], counts["male"])
    nurse = query(
        caption_study,
        "SELECT labor_pct_women, labor_dominated FROM texts_who WHERE occupation = 'nurse'",
    )
    assert nurse and all(r == (pytest.approx(87.9, abs=5), "female") for r in nurse)


def test_caption_marked_words_drop_what_decides_the_labels(caption_study):
    words = {r[0] for r in query(caption_study, "SELECT word FROM texts_marked_words")}
    summary = query(
        caption_study,
        "SELECT comparison, texts_female, texts_male FROM texts_marked_summary "
        "WHERE scope = 'pooled'",
    )
    assert {r[0] for r in summary} == {"associated", "specified"}
    assert all(f > 10 and m > 10 for _, f, m in summary)
    gender = load_gender_terms()
    forbidden = {*load_association_terms().words(), *gender.words["female"], "nurse", "doctor"}
    assert not words & forbidden


def test_caption_rerun_is_skipped_and_a_report_shows_the_section(caption_study):
    assert cli("who_how", str(caption_study)) == 0
    runs = query(
        caption_study, "SELECT status FROM stage_runs WHERE stage = 'who_how' ORDER BY finished_at"
    )
    assert [r[0] for r in runs] == ["done", "skipped"]
    assert cli("report", str(caption_study)) == 0
    page = (caption_study / "report" / "report.html").read_text(encoding="utf-8")
    assert 'id="who-how"' in page and 'id="who-how-agreement"' in page
    assert "fig-who_deciles_association" in page


def test_killed_association_resumes_where_it_stopped(laion_path, make_study, monkeypatch):
    """Batches of 50; the third batch is interrupted; the rerun does only the rest."""
    import corpus_audit.stages.who_how as stage
    from corpus_audit.methods.texts import association
    from corpus_audit.stages.indicators import indicators
    from corpus_audit.stages.select import select

    study = make_study(
        [laion_path], indicators={"use_names": False}, texts={"batch_size": 50, "srbs": False}
    )
    select(study, progress=False)
    indicators(study, progress=False)
    real = association.AssociationCounter.count
    calls = []

    def interrupted(self, texts, source="texts"):
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, texts, source)

    monkeypatch.setattr(association.AssociationCounter, "count", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stage.who_how(study, progress=False)
    total = study.count("captions")
    assert total > 150 and study.count("texts_associations") == 100
    assert str(stage.progress(study)) == f"100/{total} texts"
    from corpus_audit.core.stage_state import stage_state

    assert stage_state(study, "who_how").state == "partial"
    monkeypatch.setattr(association.AssociationCounter, "count", real)
    run = stage.who_how(study, progress=False)
    assert run.provenance["associated_this_run"] == total - 100
    terms = load_association_terms()
    for text, label in study.con.execute(
        "SELECT c.text, a.association FROM captions c JOIN texts_associations a "
        "ON a.text_id = c.caption_id"
    ).fetchall():
        assert label == py_association(text, terms)[1]
    assert study.count("texts_associations") == total


# -- a text corpus ----------------------------------------------------------------------------
def test_texts_command_on_all_real_captions(corpus_file, corpus_study):
    table = pq.read_table(corpus_file).to_pydict()
    texts, genders = table["text"], table["gender"]
    usable = [i for i, t in enumerate(texts) if t]
    got = dict(
        query(
            corpus_study,
            "SELECT row_in_file, association FROM texts_associations "
            "JOIN texts_documents USING (text_id)",
        )
    )
    terms = load_association_terms()
    assert len(got) == len(usable)
    assert all(got[i] == py_association(texts[i], terms)[1] for i in usable)
    # agreement with the gender column, counted here
    agreement = {
        g: (spec, same)
        for g, spec, same in query(
            corpus_study, "SELECT gender, specified, associated_same FROM texts_agreement"
        )
    }
    for g in ("female", "male"):
        spec = [i for i in usable if genders[i] == g]
        assert agreement[g] == (len(spec), sum(got[i] == g for i in spec))


@pytest.mark.parametrize("comparison", ["associated", "specified"])
def test_texts_command_pooled_marked_words_equal_a_counter_computation(
    corpus_file, corpus_study, comparison
):
    table = pq.read_table(corpus_file).to_pydict()
    rows = query(
        corpus_study,
        "SELECT d.text, a.association, d.specified FROM texts_documents d "
        "JOIN texts_associations a USING (text_id) ORDER BY text_id",
    )
    texts = [r[0] for r in rows]
    labels = [r[1] if comparison == "associated" else r[2] for r in rows]
    assert len(texts) == sum(1 for t in table["text"] if t)
    gender = load_gender_terms()
    one_word = {f for o in load_occupations() for f in o.forms if re.fullmatch(r"\w+", f)}
    drop = [*load_association_terms().words(), *gender.words["female"], *gender.words["male"]]
    drop += sorted(one_word)
    expected, _, _ = py_marked_words(texts, labels, drop)
    got = {
        w: (z, f, m)
        for w, z, f, m in query(
            corpus_study,
            "SELECT word, z, count_female, count_male FROM texts_marked_words "
            "WHERE scope = 'pooled' AND comparison = ?",
            [comparison],
        )
    }
    assert set(got) == set(expected) and len(got) > 30
    for w, (z, f, m) in expected.items():
        assert got[w][0] == pytest.approx(z, rel=1e-9) and got[w][1:] == (f, m), w


def test_texts_command_srbs_equals_a_numpy_and_scipy_computation(corpus_study):
    from scipy.stats import ttest_ind

    from corpus_audit.backends.embeddings import load_embedder
    from corpus_audit.methods.texts import embed_words

    words = query(
        corpus_study,
        "SELECT comparison, side, word FROM texts_marked_words WHERE scope = 'pooled'",
    )
    sets = {(c, s): [w for c2, s2, w in words if (c2, s2) == (c, s)] for c, s, _ in words}
    vectors = embed_words(sorted({w for _, _, w in words}), load_embedder())

    def nearest(word: str, targets: list[str]) -> float:
        return min(1.0 - float(np.dot(vectors[word], vectors[t])) for t in targets)

    scores = {
        side: [
            nearest(w, sets["specified", "female"]) - nearest(w, sets["specified", "male"])
            for w in sets["associated", side]
        ]
        for side in ("female", "male")
    }
    t, p = ttest_ind(scores["female"], scores["male"], equal_var=False)
    (row,) = query(
        corpus_study,
        "SELECT n_female, n_male, mean_female, mean_male, t, p FROM texts_srbs_tests "
        "WHERE scope = 'pooled'",
    )
    assert row[:2] == (len(scores["female"]), len(scores["male"]))
    assert row[2] == pytest.approx(np.mean(scores["female"]), abs=1e-5)
    assert row[3] == pytest.approx(np.mean(scores["male"]), abs=1e-5)
    assert row[4] == pytest.approx(t, rel=1e-4) and row[5] == pytest.approx(p, rel=1e-3)
    assert row[2] < 0 < row[3] and row[5] < 0.01  # as docs/who_vs_how.md reports


def test_texts_command_rerun_skips_and_page_is_written(corpus_file, corpus_study, capsys):
    assert (
        cli("texts", str(corpus_file), "--out", str(corpus_study), "--gender-column", "gender") == 0
    )
    assert "skipped (nothing to do)" in capsys.readouterr().out
    assert cli("status", str(corpus_study)) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("who_how")]
    assert "skipped" in line and "50847" in line
    page = (corpus_study / "report" / "who_how.html").read_text(encoding="utf-8")
    assert "mother" in page and "skateboard" in page and "<script" not in page


# -- bad input --------------------------------------------------------------------------------
def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_bad_gender_value_is_one_line_naming_file_and_row(tmp_path, capsys):
    path = write_jsonl(
        tmp_path / "bios.jsonl",
        [
            {"occupation": "nurse", "text": "She works nights.", "gender": "female"},
            {"occupation": "nurse", "text": "He works days.", "gender": "man"},
        ],
    )
    out = tmp_path / "out"
    code = cli(
        "texts",
        str(path),
        "--out",
        str(out),
        "--occupation-column",
        "occupation",
        "--gender-column",
        "gender",
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "bios.jsonl" in err and "line 2" in err and "'man'" in err
    assert not out.exists()  # issue 23: a failed first run leaves no study behind


def test_missing_column_and_empty_corpus_are_one_line(tmp_path, capsys):
    path = write_jsonl(tmp_path / "bios.jsonl", [{"job": "nurse", "text": "She works."}])
    code = cli("texts", str(path), "--out", str(tmp_path / "a"), "--occupation-column", "occ")
    err = capsys.readouterr().err.strip()
    assert code == 2 and "no occupation column 'occ'" in err and "job, text" in err
    empty = write_jsonl(tmp_path / "empty.jsonl", [{"text": None}, {"text": ""}])
    assert cli("texts", str(empty), "--out", str(tmp_path / "b")) == 2
    assert "no usable text" in capsys.readouterr().err


def test_null_and_non_utf8_texts_are_counted_and_html_is_escaped(coco_path, tmp_path, capsys):
    """300 real COCO captions a side for one occupation (its name holds markup), told by
    "She says:" / "He says:"; 20 women's end "She wore a <b>dress</b> <script>...</script>",
    20 men's "He wore a suit".
    A null text and one with invalid UTF-8 bytes are counted and skipped."""
    captions = pq.read_table(coco_path, columns=["caption"]).column("caption").to_pylist()
    occupation = "<i>nurse</i>"
    women = [
        {
            "occupation": occupation,
            "text": "She says: "
            + captions[i]
            + (" She wore a <b>dress</b> <script>x()</script>." if i < 20 else ""),
        }
        for i in range(300)
    ]
    men = [
        {
            "occupation": occupation,
            "text": "He says: " + captions[300 + i] + (" He wore a suit." if i < 20 else ""),
        }
        for i in range(300)
    ]
    path = write_jsonl(tmp_path / "bios.jsonl", [*women, *men, {"occupation": "x", "text": None}])
    with path.open("ab") as fh:
        fh.write(b'{"occupation": "x", "text": "bad \xff bytes"}\n')
    out = tmp_path / "out"
    assert cli("texts", str(path), "--out", str(out), "--occupation-column", "occupation") == 0
    printed = capsys.readouterr().out
    assert "dropped 1: text null or empty" in printed and "dropped 1: text not UTF-8" in printed
    marked = dict(
        query(out, "SELECT word, side FROM texts_marked_words WHERE scope = 'occupation'")
    )
    assert marked["dress"] == "female" and marked["suit"] == "male"
    assert "script" not in marked and "she" not in marked
    page = (out / "report" / "who_how.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<i>nurse" not in page
    assert "&lt;i&gt;nurse&lt;/i&gt;" in page and "&lt;script&gt;x()&lt;/script&gt;" in page


def test_texts_refuses_a_caption_study(caption_study, corpus_file, capsys):
    before = query(caption_study, "SELECT count(*) FROM texts_associations")
    assert cli("texts", str(corpus_file), "--out", str(caption_study)) == 2
    assert "holds a caption study" in capsys.readouterr().err
    assert query(caption_study, "SELECT count(*) FROM texts_associations") == before
    assert math.isfinite(before[0][0])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("source", "files", "texts.source: 'files' is not one of"),
        ("corpus_weight", 1.5, "texts.corpus_weight: 1.5 is not in [0, 1]"),
        ("z_threshold", 0, "texts.z_threshold: 0.0 must be > 0"),
        ("examples", -1, "texts.examples: -1 must be >= 0"),
        ("batch_size", 0, "texts.batch_size: 0 must be >= 1"),
    ],
)
def test_bad_texts_settings_name_the_key(tmp_path, key, value, message):
    from corpus_audit.core.config import config_from_dict
    from corpus_audit.core.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_dict({"texts": {key: value}}, tmp_path, "study.toml")
