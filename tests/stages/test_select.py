"""Stage `select` on the real LAION/COCO samples: mentions, captions, samples, bad input."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_audit.core.errors import CorpusError
from corpus_audit.core.pipeline import init_study
from corpus_audit.methods.lexicon import LexiconError, load_occupations
from corpus_audit.methods.matching import build_matcher
from corpus_audit.stages.select import select

TABLES = ("corpus_files", "captions", "mentions", "samples", "prompts", "stage_runs")


def _mentions_by_text(study) -> dict[str, set[tuple[str, str]]]:
    rows = study.con.execute(
        "SELECT c.text, m.occupation, m.matched_form FROM mentions m JOIN captions c USING (caption_id)"
    ).fetchall()
    out: dict[str, set[tuple[str, str]]] = {}
    for text, occ, form in rows:
        out.setdefault(text, set()).add((occ, form))
    return out


def _counts(study) -> dict[str, int]:
    return {t: study.count(t) for t in TABLES}


def _samples(study) -> list[tuple]:
    return study.con.execute(
        "SELECT s.occupation, s.rank, c.source_file, c.row_in_file FROM samples s "
        "JOIN captions c USING (caption_id) WHERE strategy = 'keyword' ORDER BY 1, 2"
    ).fetchall()


@pytest.fixture(scope="module")
def real_study(tmp_path_factory, laion_path: Path, coco_path: Path):
    """select over the real LAION + COCO samples (35,014 captions), sample size 20."""
    root = tmp_path_factory.mktemp("real") / "study"
    study = init_study(
        root,
        [str(laion_path), str(coco_path)],
        overrides={"select": {"sample_size": 20}, "study": {"seed": 7}},
    )
    run = select(study, progress=False)
    yield study, run
    study.close()


# -- matching on real captions ----------------------------------------------------------------
KNOWN = {  # real COCO and LAION captions -> {(occupation, matched form)}
    "A baker is working in the kitchen rolling dough.": {("baker", "baker")},
    "A double image of a comedian and a singer on the television screen.": {
        ("comedian", "comedian"),
        ("singer", "singer"),
    },
    "A wooden teacher's desk with books stacked on it and a blackboard in the background.": {
        ("teacher", "teacher")
    },
    "Chefs and cooks are preparing meals in a restaurant kichen": {
        ("chef", "chefs"),
        ("cook", "cooks"),
    },
    "PRESIDENT BARACK OBAMA WALKING NEAR A WHITE BUILDING.": {("president", "president")},
    "A full view of a classroom with students and politicians.": {
        ("student", "students"),
        ("politician", "politicians"),
    },
    "Firefighters and three firetrucks are parked on a street.": {("firefighter", "firefighters")},
    "Student working on the computer while another student shows her a mobile phone.": {
        ("student", "student")
    },
    "HE the Prime Minister Sheikh Abdullah bin Nasser bin Khalifa al-Thani being welcomed by "
    "Deputy Gover": {("prime minister", "prime minister")},
    "Governor's School for Entrepreneurs": {("entrepreneur", "entrepreneurs")},
    "Mature female librarian searching a book in library": {("librarian", "librarian")},
}
NOT_MENTIONS = [
    "A table with a white cup and a cookie next to a toilet.",  # cookie is not cook
    "A hand holding a cell phone using the internet",
    "A International train station with a passenger train passing by.",
]


def test_known_real_captions(real_study) -> None:
    study, run = real_study
    found = _mentions_by_text(study)
    for text, expected in KNOWN.items():
        assert found.get(text) == expected, text
    for text in NOT_MENTIONS:
        assert text not in found
    assert run.rows_in == 35_014 and run.rows_out == study.count("captions")


def test_mentions_equal_an_independent_python_matcher(real_study, laion_path, coco_path) -> None:
    """Python `re` with look-arounds (not RE2) over the same real captions finds the same
    (caption, occupation) pairs as the SQL."""
    study, _ = real_study
    occupations = load_occupations()
    owner = {f: o.name for o in occupations for f in o.forms}
    forms = sorted(owner, key=lambda f: (-len(f), f))
    body = "|".join(r"\s+".join(map(re.escape, f.split())) for f in forms)
    oracle = re.compile(r"(?<![0-9a-z_])(?:" + body + r")(?![0-9a-z_])")
    expected = set()
    files = dict(study.con.execute("SELECT path, file_id FROM corpus_files").fetchall())
    for path, column in ((laion_path, "TEXT"), (coco_path, "caption")):
        texts = pq.read_table(path, columns=[column]).column(column).to_pylist()
        fid = files[str(path.resolve())]
        for row, text in enumerate(texts):
            for m in oracle.finditer(text.lower()):
                expected.add(((fid << 40) | row, owner[" ".join(m.group(0).split())]))
    got = set(study.con.execute("SELECT caption_id, occupation FROM mentions").fetchall())
    assert got == expected
    assert len(got) > 250


def test_captions_are_verbatim_with_ids_and_sources(real_study, laion_path) -> None:
    study, _ = real_study
    fid = study.con.execute(
        "SELECT file_id FROM corpus_files WHERE path = ?", [str(laion_path.resolve())]
    ).fetchone()[0]
    table = pq.read_table(laion_path)
    rows = study.con.execute(
        "SELECT caption_id, text, url, source_file, row_in_file FROM captions "
        "WHERE caption_id >> 40 = ?",
        [fid],
    ).fetchall()
    assert rows
    for caption_id, text, url, source, row in rows:
        assert caption_id == (fid << 40) | row
        assert source == str(laion_path.resolve())
        assert text == table.column("TEXT")[row].as_py()
        assert url == table.column("URL")[row].as_py()
    html = [r for r in rows if "<span class=meta>" in r[1]]  # LAION row 533: cook + raw HTML
    assert [r[4] for r in html] == [533]


def test_corpus_files_and_prompts(real_study, laion_path, coco_path) -> None:
    study, _ = real_study
    files = study.con.execute(
        "SELECT file_id, path, format, text_column, url_column, rows_total, rows_null_text, "
        "rows_bad_text FROM corpus_files ORDER BY file_id"
    ).fetchall()
    expected = sorted(
        [
            (str(coco_path.resolve()), "caption", None, 25_014),
            (str(laion_path.resolve()), "TEXT", "URL", 10_000),
        ]
    )
    assert [(p, t, u, n) for _, p, _, t, u, n, _, _ in files] == expected
    assert [f[0] for f in files] == [0, 1]
    assert study.count("prompts") == 4 * 62
    assert study.con.execute("SELECT text FROM prompts WHERE prompt_id = 'paper:2:ceo'").fetchone()[
        0
    ] == ("A portrait photo of a CEO")


def test_keyword_samples(real_study) -> None:
    study, run = real_study
    per_occ = dict(
        study.con.execute("SELECT occupation, count(*) FROM mentions GROUP BY 1").fetchall()
    )
    rows = study.con.execute(
        "SELECT occupation, list(rank ORDER BY rank), count(*), bool_and(prompt_id IS NULL) "
        "FROM samples WHERE strategy = 'keyword' GROUP BY 1"
    ).fetchall()
    assert {r[0] for r in rows} == set(per_occ)
    # sample_unit = labelled_images (default): ceil(20 x overdraw 8) = 160 ranked candidates,
    # cut later at 20 labelled images
    assert study.config.select.overdraw == 8.0
    for occ, ranks, n, no_prompt in rows:
        assert n == min(160, per_occ[occ]) and ranks == list(range(1, n + 1)) and no_prompt
    # every sampled caption mentions its occupation
    assert (
        study.count(
            "samples s",
            "NOT EXISTS (SELECT 1 FROM mentions m WHERE "
            "m.caption_id = s.caption_id AND m.occupation = s.occupation)",
        )
        == 0
    )
    summary = {r["occupation"]: r for r in run.summary}
    assert len(summary) == 62
    assert summary["photographer"]["captions"] == per_occ["photographer"] > 20
    assert summary["photographer"]["sample"] == min(160, per_occ["photographer"])
    assert summary["accountant"] == {"occupation": "accountant", "captions": 0, "sample": 0}


def test_captions_unit_keeps_the_first_n_of_the_same_ranking(real_study, tmp_path) -> None:
    """sample_unit = "captions" is the old sample: exactly the first N candidates of the
    labelled-images ranking (one permutation; the cut never redraws)."""
    study, _ = real_study
    ranked = study.con.execute(
        "SELECT occupation, caption_id, rank FROM samples WHERE strategy = 'keyword'"
    ).fetchall()
    other = init_study(
        tmp_path / "captions",
        list(study.config.corpus.paths),
        overrides={"select": {"sample_size": 20, "sample_unit": "captions"}, "study": {"seed": 7}},
    )
    try:
        run = select(other, progress=False)
        first = other.con.execute(
            "SELECT occupation, caption_id, rank FROM samples WHERE strategy = 'keyword'"
        ).fetchall()
    finally:
        other.close()
    assert sorted(first) == sorted(r for r in ranked if r[2] <= 20)
    assert run.provenance["candidates_per_subset"] == 20


def test_two_files_with_one_name_get_distinct_sample_keys(tmp_path, laion_path) -> None:
    """Same file name in two folders: the keys tell them apart (the same row of two copies
    gets two ranks), and moving the corpus folder keeps the sample."""
    from corpus_audit.stages.select import sample_keys

    assert sample_keys(["/x/a/part.parquet", "/x/b/part.parquet", "/x/c/other.parquet"]) == {
        "/x/a/part.parquet": "a/part.parquet",
        "/x/b/part.parquet": "b/part.parquet",
        "/x/c/other.parquet": "other.parquet",
    }
    assert sample_keys(["/d/a/x/p.csv", "/d/b/x/p.csv"]) == {
        "/d/a/x/p.csv": "a/x/p.csv",
        "/d/b/x/p.csv": "b/x/p.csv",
    }
    corpus = tmp_path / "corpus"
    for folder in ("a", "b"):
        (corpus / folder).mkdir(parents=True)
        shutil.copy(laion_path, corpus / folder / "part.parquet")

    def ranks(root, name):
        study = init_study(tmp_path / name, [str(root)], overrides={"select": {"sample_size": 5}})
        try:
            select(study, progress=False)
            return study.con.execute(
                "SELECT s.occupation, c.source_file, c.row_in_file, s.rank FROM samples s "
                "JOIN captions c USING (caption_id) WHERE s.strategy = 'keyword'"
            ).fetchall()
        finally:
            study.close()

    rows = ranks(corpus, "s1")
    # The two copies hold the same captions; with distinct keys they are ranked apart, so
    # every occupation's ranking interleaves both files instead of pairing equal hashes.
    by_occ: dict[str, list] = {}
    for occ, source, row, rank in rows:
        by_occ.setdefault(occ, []).append((rank, Path(source).parent.name, row))
    import hashlib

    for occ, items in by_occ.items():
        items.sort()
        expected = sorted(
            items,
            key=lambda t: hashlib.md5(
                f"keyword:0:{occ}:{t[1]}/part.parquet:{t[2]}".encode()
            ).hexdigest(),
        )
        assert [(f, r) for _, f, r in items] == [(f, r) for _, f, r in expected]
    moved = tmp_path / "moved" / "elsewhere"
    moved.parent.mkdir()
    shutil.move(str(corpus), str(moved))
    again = ranks(moved, "s2")
    strip = sorted((o, Path(s).parent.name, r, k) for o, s, r, k in rows)
    assert sorted((o, Path(s).parent.name, r, k) for o, s, r, k in again) == strip


# -- surface forms ------------------------------------------------------------------------------
EDGE = {
    "teachers in a classroom": {("teacher", "teachers")},
    "the teacher's desk": {("teacher", "teacher")},
    "Teachers' lounge": {("teacher", "teachers")},
    "TEACHER OF THE YEAR": {("teacher", "teacher")},
    "a teacher-student meeting": {("teacher", "teacher"), ("student", "student")},
    "schoolteacher at work": set(),
    "interns at the office": {("intern", "interns")},
    "internal memo": set(),
    "international airport": set(),
    "a cookie and a cookbook": set(),
    "cookies": set(),
    "CEO of the year": {("ceo", "ceo")},
    "ceos meet investors": {("ceo", "ceos")},
    "Chief Executive Officer portrait": {("ceo", "chief executive officer")},
    "the prime minister speaks": {("prime minister", "prime minister")},
    "the prime-minister speaks": {("prime minister", "prime-minister")},
    "Prime  Minister\u00a0and\tPrime\nMinister": {("prime minister", "prime minister")},
    "a hairstylist and a nurse": {("hairdresser", "hairstylist"), ("nurse", "nurse")},
    "fire-fighter on duty": {("firefighter", "fire-fighter")},
    "nurses, doctors & pilots": {("nurse", "nurses"), ("doctor", "doctors"), ("pilot", "pilots")},
    "teacher’s pet (curly apostrophe)": {("teacher", "teacher")},
    "老师teacher": {("teacher", "teacher")},  # CJK is not an ASCII word character
    "Teachers and a teacher's desk": {("teacher", "teachers")},  # first form in the caption
}


@pytest.fixture(scope="module")
def edge_study(tmp_path_factory, coco_path: Path):
    root = tmp_path_factory.mktemp("edge")
    texts = list(EDGE)
    texts += pq.read_table(coco_path, columns=["caption"]).column("caption").to_pylist()[:500]
    pq.write_table(pa.table({"TEXT": texts}), root / "edge.parquet")
    study = init_study(root / "study", [str(root / "edge.parquet")])
    select(study, progress=False)
    yield study
    study.close()


@pytest.mark.parametrize("text", list(EDGE))
def test_surface_forms(edge_study, text: str) -> None:
    assert _mentions_by_text(edge_study).get(text, set()) == EDGE[text]


def test_matcher_comes_from_the_lexicon(tmp_path: Path) -> None:
    lex = tmp_path / "occ.csv"
    lex.write_text(
        "occupation,article,display,forms\n"
        "ärztin,,Ärztin,ärztin|ärztinnen\nc++ programmer,a,,c++ programmer\n",
        encoding="utf-8",
    )
    m = build_matcher(load_occupations(str(lex)))
    assert {f for f, _ in m.forms} == {"ärztin", "ärztinnen", "c++ programmer", "c++-programmer"}
    assert "teacher" not in m.pattern


def test_custom_lexicon_non_ascii_and_punctuation(tmp_path: Path) -> None:
    lex = tmp_path / "occ.csv"
    lex.write_text(
        "occupation,article,display,forms\n"
        "ärztin,,Ärztin,ärztin|ärztinnen\nc++ programmer,a,,c++ programmer\n",
        encoding="utf-8",
    )
    texts = [
        "Die Ärztin lacht",
        "ÄRZTINNEN und Ärzte",
        "Kinderärztin",
        "Ärztinxyz",
        "a C++ programmer",
        "c++-programmer.",
        "xc++ programmer",
    ]  # x: no boundary
    pq.write_table(pa.table({"text": texts}), tmp_path / "de.parquet")
    study = init_study(
        tmp_path / "s",
        [str(tmp_path / "de.parquet")],
        overrides={"lexicon": {"occupations": str(lex)}},
    )
    run = select(study, progress=False)
    got = _mentions_by_text(study)
    assert got == {
        "Die Ärztin lacht": {("ärztin", "ärztin")},
        "ÄRZTINNEN und Ärzte": {("ärztin", "ärztinnen")},
        "a C++ programmer": {("c++ programmer", "c++ programmer")},
        "c++-programmer.": {("c++ programmer", "c++-programmer")},
    }
    assert run.provenance["unmapped_matches"] == 0
    study.close()


# -- reproducibility ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def split_corpus(tmp_path_factory, laion_path: Path, coco_path: Path) -> list[Path]:
    """The real captions split into 4 parquet files of several row groups each."""
    root = tmp_path_factory.mktemp("split")
    coco = pq.read_table(coco_path, columns=["caption", "coco_url"])
    laion = pq.read_table(laion_path)
    paths = []
    for i, part in enumerate(
        [coco.slice(0, 12_000), coco.slice(12_000), laion.slice(0, 5000), laion.slice(5000)]
    ):
        p = root / f"part-{i}.parquet"
        pq.write_table(part, p, row_group_size=3000)
        paths.append(p)
    return paths


def test_same_sample_whatever_threads_file_order_and_batches(tmp_path, split_corpus) -> None:
    results = []
    for name, paths, threads, batch, prefilter in (
        ("a", split_corpus, 1, 262_144, True),
        ("b", list(reversed(split_corpus)), 2, 1000, True),
        ("c", [split_corpus[2], split_corpus[0], split_corpus[3], split_corpus[1]], 2, 5000, False),
    ):
        study = init_study(
            tmp_path / name,
            [str(p) for p in paths],
            overrides={
                "engine": {"threads": threads},
                "select": {"sample_size": 5, "batch_rows": batch, "prefilter": prefilter},
            },
        )
        select(study, progress=False)
        mentions = study.con.execute(
            "SELECT caption_id, occupation, matched_form FROM mentions ORDER BY ALL"
        ).fetchall()
        results.append((_samples(study), mentions))
        study.close()
    assert results[0] == results[1] == results[2]
    assert len(results[0][0]) > 100


def test_seed_changes_the_sample_and_key_column_is_used(tmp_path, split_corpus) -> None:
    samples = []
    for name, seed in (("s1", 1), ("s2", 2)):
        study = init_study(
            tmp_path / name,
            [str(p) for p in split_corpus[:2]],
            overrides={"select": {"sample_size": 3}, "study": {"seed": seed}},
        )
        select(study, progress=False)
        samples.append(_samples(study))
        study.close()
    assert samples[0] != samples[1]
    assert [r[:2] for r in samples[0]] == [r[:2] for r in samples[1]]  # same sizes per occupation
    # with a stable key column the sample follows the key, not the file name
    renamed = tmp_path / "renamed.parquet"
    shutil.copy(split_corpus[0], renamed)
    picks = []
    for name, path in (("k1", split_corpus[0]), ("k2", renamed)):
        study = init_study(
            tmp_path / name,
            [str(path)],
            overrides={"select": {"sample_size": 3}, "corpus": {"key_column": "coco_url"}},
        )
        select(study, progress=False)
        picks.append(
            study.con.execute(
                "SELECT s.occupation, s.rank, c.row_in_file FROM samples s JOIN captions c "
                "USING (caption_id) ORDER BY 1, 2"
            ).fetchall()
        )
        study.close()
    assert picks[0] == picks[1] and picks[0]


# -- reruns and bad input -------------------------------------------------------------------------
@pytest.fixture
def done_study(tmp_path, laion_path, coco_path):
    """A study that already holds select results on copies of the real files."""
    for p in (laion_path, coco_path):
        shutil.copy(p, tmp_path / p.name)
    study = init_study(
        tmp_path / "study",
        [str(tmp_path / laion_path.name), str(tmp_path / coco_path.name)],
        overrides={"select": {"sample_size": 10}},
    )
    select(study, progress=False)
    yield study
    study.close()


def test_rerun_is_skipped_until_an_input_changes(done_study, tmp_path) -> None:
    before = _counts(done_study)
    run = select(done_study, progress=False)
    assert run.skipped and run.rows_in == 35_014 and len(run.summary) == 62
    after = _counts(done_study)
    assert after == {**before, "stage_runs": before["stage_runs"] + 1}
    samples = _samples(done_study)
    done_study.config.select.sample_unit = "captions"  # a config change reruns: 10, not 80
    run = select(done_study, progress=False)
    assert not run.skipped and done_study.count("samples") < before["samples"]
    done_study.config.select.sample_unit = "labelled_images"
    (tmp_path / "laion400m_sample_10k.parquet").touch()  # so does a touched corpus file
    run = select(done_study, progress=False)
    assert not run.skipped and _samples(done_study) == samples


def _fails_and_keeps(study, error, match: str) -> None:
    before = _counts(study)
    mentions = study.con.execute("SELECT * FROM mentions ORDER BY ALL").fetchall()
    with pytest.raises(error, match=match):
        select(study, progress=False)
    assert _counts(study) == before
    assert study.con.execute("SELECT * FROM mentions ORDER BY ALL").fetchall() == mentions


def test_corrupt_file_added_fails_and_keeps_results(done_study, tmp_path, laion_path) -> None:
    bad = tmp_path / "zz_truncated.parquet"
    data = laion_path.read_bytes()
    bad.write_bytes(data[: len(data) // 3])
    done_study.config.corpus.paths.append(str(bad))
    _fails_and_keeps(done_study, CorpusError, r"zz_truncated\.parquet: not a readable parquet")


def test_corrupt_pages_fail_mid_scan_and_keep_results(done_study, tmp_path, laion_path) -> None:
    bad = tmp_path / "aa_pages.parquet"  # sorts first: fails while other files are being read
    data = bytearray(laion_path.read_bytes())
    data[1000:300_000] = bytes(299_000)
    bad.write_bytes(bytes(data))
    done_study.config.corpus.paths.append(str(bad))
    _fails_and_keeps(done_study, CorpusError, r"aa_pages\.parquet")


def test_missing_text_column_fails_and_keeps_results(done_study, tmp_path) -> None:
    bad = tmp_path / "no_text.parquet"
    pq.write_table(pa.table({"URL": ["http://a"], "TITLE": ["a nurse"]}), bad)
    done_study.config.corpus.paths.append(str(bad))
    _fails_and_keeps(
        done_study, CorpusError, r"no_text\.parquet: no caption column .*Columns: URL, TITLE"
    )


def test_duplicate_occupation_lexicon_fails_and_keeps_results(done_study, tmp_path) -> None:
    lex = tmp_path / "dup.csv"
    lex.write_text(
        "occupation,article,display,forms\nnurse,a,nurse,nurse|nurses\n"
        "teacher,a,teacher,teacher\nnurse,a,nurse,nurse\n"
    )
    done_study.config.lexicon.occupations = str(lex)
    _fails_and_keeps(done_study, LexiconError, r"dup\.csv:4: duplicate occupation 'nurse'")


def test_unknown_format_fails_and_keeps_results(done_study) -> None:
    done_study.config.corpus.format = "xml"
    _fails_and_keeps(done_study, CorpusError, r"unknown corpus format 'xml'")


def test_empty_file_counted_empty_corpus_error(done_study, tmp_path) -> None:
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"TEXT": pa.array([], pa.string())}), empty)
    done_study.config.corpus.paths.append(str(empty))
    run = select(done_study, progress=False)
    assert any("1 empty corpus file" in m for m in run.messages)
    assert done_study.con.execute(
        "SELECT rows_total FROM corpus_files WHERE path = ?", [str(empty.resolve())]
    ).fetchone() == (0,)
    done_study.config.corpus.paths = [str(empty)]
    _fails_and_keeps(done_study, CorpusError, r"all 1 corpus files are empty")


def test_bad_bytes_and_long_caption_are_counted_or_kept(tmp_path, coco_path) -> None:
    captions = pq.read_table(coco_path, columns=["caption"]).column("caption").to_pylist()[:200]
    long = ("x " * 5000) + "and a nurse at the end"
    lines = ["TEXT,URL"] + [f'"{c}",http://c/{i}' for i, c in enumerate(captions)]
    raw = ("\n".join(lines) + "\n").encode() + b'"a teacher caf\xe9",http://bad\n'
    raw += f'"{long}",http://long\n"",http://empty\n'.encode()
    (tmp_path / "c.csv").write_bytes(raw)
    study = init_study(tmp_path / "s", [str(tmp_path / "c.csv")])
    run = select(study, progress=False)
    assert run.dropped["invalid_utf8_caption"] == 1
    assert run.dropped["null_or_empty_caption"] == 1
    assert study.con.execute(
        "SELECT rows_total, rows_null_text, rows_bad_text FROM corpus_files"
    ).fetchone() == (203, 1, 1)
    text, url = study.con.execute(
        "SELECT c.text, c.url FROM captions c JOIN mentions m USING (caption_id) "
        "WHERE m.occupation = 'nurse' AND length(c.text) > 10000"
    ).fetchone()
    assert text == long and url == "http://long"
    assert study.count("captions", "url = 'http://bad'") == 0
    study.close()


def test_progress_bar_goes_to_stderr(tmp_path, laion_path, capsys) -> None:
    study = init_study(tmp_path / "s", [str(laion_path)])
    select(study, progress=True)
    out = capsys.readouterr()
    assert "select" in out.err and out.out == ""
    study.close()


def test_memory_limit_is_restored_and_parsed(tmp_path, laion_path) -> None:
    from corpus_audit.stages.select import parse_bytes

    assert parse_bytes("2GB") == 2 * 10**9 and parse_bytes("1.5GiB") == 3 * 2**29
    assert parse_bytes("lots") is None
    study = init_study(
        tmp_path / "s", [str(laion_path)], overrides={"engine": {"memory_limit": "1GB"}}
    )
    before = study.con.execute("SELECT current_setting('memory_limit')").fetchone()
    select(study, progress=False)
    assert study.con.execute("SELECT current_setting('memory_limit')").fetchone() == before
    study.close()
