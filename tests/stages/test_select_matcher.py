"""``select.matcher``: the hyperscan matcher gives the DuckDB path's tables row for row.

Real data only: the four real caption corpora of ../shared/data (LAION-400M, COCO, CC3M and
the MAGBIG prompts in ten languages, one caption per prompt and language), the built-in
lexicon and a multilingual one (forms that start or end with non-ASCII letters, in Latin,
Cyrillic, CJK and Hangul script: RE2's consumed guards). The DuckDB path (RE2 prefilter +
the SQL of sql/select/20_found-22_edges) is the reference. Plus the matcher alone on the
arrays that break a buffer-level scan (sliced arrays, nulls holding bytes, NUL bytes in a
caption, forms at a caption's first or last byte, overlapping forms), and the fallback:
with the library hidden the DuckDB path runs and the run's notes say so.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_audit.core.errors import ConfigError
from corpus_audit.core.pipeline import init_study
from corpus_audit.core.store import Study, sql_text
from corpus_audit.methods import multimatch
from corpus_audit.methods.lexicon import load_occupations
from corpus_audit.methods.matching import build_matcher
from corpus_audit.methods.multimatch import HyperscanMatcher, resolve_matcher
from corpus_audit.stages.select import select

pytest.importorskip("hyperscan", reason="hyperscan is not installed (extra 'fast')")

TABLES = {
    "captions": "SELECT * FROM captions ORDER BY caption_id",
    "mentions": "SELECT * FROM mentions ORDER BY caption_id, occupation",
    "samples": "SELECT * FROM samples ORDER BY strategy, occupation, rank",
    "corpus_files": "SELECT * FROM corpus_files ORDER BY file_id",
}

# a multilingual lexicon: forms found in the MAGBIG prompts (de, fr, es, it, ru, ja, ko, zh)
MULTI_LEXICON = """occupation,article,display,forms
accountant,an,accountant,accountant|buchhalter|buchhalters|buchhalterin|comptable|contador|ragioniere|бухгалтер|бухгалтера|会計士|회계사|会计
doctor,a,doctor,doctor|arzt|arztes|ärztin|ärztinnen|médecin|médico|врач|врача|医者|의사|医生
teacher,a,teacher,teacher|lehrer|lehrers|lehrerin|enseignant|enseignante|profesor|profesora|insegnante|учитель|учителя|учительница|教師|교사|老师
engineer,an,engineer,engineer|ingenieur|ingenieurs|ingénieur|ingeniero|ingegnere|инженер|инженера|エンジニア|엔지니어|工程师
"""


def _magbig_parquet(shared: Path, out: Path) -> Path:
    """The MAGBIG prompt files, one caption per (prompt, language), as one parquet file."""
    texts: list[str] = []
    for name in sorted((shared / "bafis").glob("magbig_*.csv")):
        with name.open(encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                texts += [v for k, v in row.items() if k != "occupation" and v]
    pq.write_table(pa.table({"caption": texts}), out)
    return out


def _run(root: Path, corpus: list[Path], matcher: str, **over: dict) -> dict:
    study = init_study(
        root,
        [str(c) for c in corpus],
        overrides={"select": {"sample_size": 25, "matcher": matcher}, "study": {"seed": 3}, **over},
    )
    try:
        run = select(study, progress=False)
        out = {t: study.con.execute(q).fetchall() for t, q in TABLES.items()}
        out["fingerprints"] = {t: study.fingerprint(t) for t in ("captions", "mentions", "samples")}
        out["stage_fingerprint"] = run.provenance["fingerprint"]
        out["candidates"] = run.provenance["candidates"]
        out["unmapped"] = run.provenance["unmapped_matches"]
        out["matcher"] = run.provenance["matcher"]
        out["notes"] = list(run.messages)
        out["dropped"] = dict(run.dropped)
        return out
    finally:
        study.close()


@pytest.fixture(scope="module")
def four_corpora(tmp_path_factory, shared_data: Path) -> list[Path]:
    d = tmp_path_factory.mktemp("four")
    magbig = _magbig_parquet(shared_data, d / "magbig_prompts.parquet")
    names = ("laion400m_sample_10k.parquet", "coco_val2017_captions.parquet")
    return [shared_data / n for n in names] + [
        shared_data / "cc3m_val_captions.parquet",
        magbig,
    ]


@pytest.fixture(scope="module")
def english_runs(tmp_path_factory, four_corpora):
    d = tmp_path_factory.mktemp("english")
    return {k: _run(d / k, four_corpora, k) for k in ("duckdb", "hyperscan")}


@pytest.fixture(scope="module")
def multilingual_runs(tmp_path_factory, four_corpora):
    """The MAGBIG prompts and the first 3,000 LAION captions (several languages): DuckDB's
    RE2 with Unicode guards costs ~20x the built-in lexicon's per row, hence the subset."""
    d = tmp_path_factory.mktemp("multi")
    lex = d / "occupations.csv"
    lex.write_text(MULTI_LEXICON, encoding="utf-8")
    laion = d / "laion_head.parquet"
    pq.write_table(pq.read_table(four_corpora[0]).slice(0, 3000), laion)
    over = {"lexicon": {"occupations": str(lex)}}
    return {k: _run(d / k, [laion, four_corpora[3]], k, **over) for k in ("duckdb", "hyperscan")}


@pytest.mark.parametrize("runs", ["english_runs", "multilingual_runs"])
def test_hyperscan_equals_duckdb_row_for_row_on_the_four_real_corpora(runs, request) -> None:
    ref, new = request.getfixturevalue(runs)["duckdb"], request.getfixturevalue(runs)["hyperscan"]
    assert (ref["matcher"], new["matcher"]) == ("duckdb", "hyperscan")
    for table in (*TABLES, "fingerprints", "stage_fingerprint", "candidates", "dropped"):
        assert new[table] == ref[table], table
    assert new["unmapped"] == ref["unmapped"] == 0
    files = {r[1].rsplit("/", 1)[-1] for r in ref["corpus_files"]}
    assert len(files) == (4 if runs == "english_runs" else 2)
    # every corpus contributes mentions: the check is not vacuous
    mentioned = {path.rsplit("/", 1)[-1] for _, _, _, path, _ in ref["captions"]}
    assert mentioned == files
    assert len(ref["mentions"]) > (900 if runs == "english_runs" else 50)


def test_multilingual_forms_with_non_ascii_edges_are_found(multilingual_runs) -> None:
    """Cyrillic, Latin-with-diacritic and CJK/Hangul forms (guards that consume a character)
    are found in the MAGBIG prompts, and mapped to their occupation as the SQL maps them."""
    forms = {m[2] for m in multilingual_runs["hyperscan"]["mentions"]}
    assert {"бухгалтера", "ärztin", "учителя", "инженера"} <= forms
    assert any(not f[0].isascii() for f in forms) and any(not f[-1].isascii() for f in forms)


def test_the_notes_say_which_matcher_ran(english_runs) -> None:
    assert "matcher: hyperscan" in english_runs["hyperscan"]["notes"][0]
    assert english_runs["duckdb"]["notes"][0] == "matcher: duckdb (select.matcher = duckdb)"


def test_fallback_without_the_library(tmp_path, laion_path, monkeypatch, capsys) -> None:
    """hyperscan hidden: auto runs the DuckDB path (the note says why), same rows; an
    explicit ``hyperscan`` is one line and exit 2, the study unchanged."""
    ref = _run(tmp_path / "ref", [laion_path], "hyperscan")
    monkeypatch.setitem(sys.modules, "hyperscan", None)  # import hyperscan -> ImportError
    assert resolve_matcher("auto")[0] == "duckdb"
    got = _run(tmp_path / "auto", [laion_path], "auto")
    assert got["matcher"] == "duckdb"
    assert got["notes"][0] == "matcher: duckdb (hyperscan is not installed; select.matcher = auto)"
    assert {t: got[t] for t in TABLES} == {t: ref[t] for t in TABLES}
    with pytest.raises(ConfigError, match="hyperscan package is not installed"):
        resolve_matcher("hyperscan")
    from corpus_audit.cli import main

    study = init_study(
        tmp_path / "cli", [str(laion_path)], overrides={"select": {"matcher": "hyperscan"}}
    )
    study.close()
    capsys.readouterr()
    code = main(["select", str(tmp_path / "cli"), "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "select.matcher = hyperscan" in err, err
    again = Study.open(tmp_path / "cli")
    assert again.count("stage_runs", "stage = 'select'") == 0
    again.close()


def test_a_bad_matcher_setting_is_refused(tmp_path, laion_path) -> None:
    with pytest.raises(ConfigError, match="matcher"):
        init_study(tmp_path / "s", [str(laion_path)], overrides={"select": {"matcher": "grep"}})


# -- the matcher alone, against DuckDB's own extraction ----------------------------------------
@pytest.fixture(scope="module")
def lexicon_matcher():
    return build_matcher(load_occupations())


def _reference(matcher, texts: pa.Array) -> tuple[list[tuple], list[int]]:
    """(row, occupation, form) of DuckDB's SQL path, and its candidate rows."""
    con = duckdb.connect()
    con.execute(sql_text("select/05_work_tables.sql"))
    con.executemany("INSERT INTO _select_forms VALUES (?, ?)", [list(f) for f in matcher.forms])
    con.register("t", pa.table({"row": np.arange(len(texts), dtype=np.int64), "text": texts}))
    con.execute(
        "INSERT INTO _select_candidates SELECT row, 0, 0, text, NULL, NULL "
        "FROM t WHERE text IS NOT NULL AND regexp_matches(text, $pattern, 'i')",
        {"pattern": matcher.pattern},
    )
    con.execute(sql_text("select/20_found.sql"), {"pattern": matcher.pattern})
    con.execute(sql_text("select/21_spaces.sql"))
    con.execute(sql_text("select/22_edges.sql"))
    rows = con.execute(
        "SELECT caption_id, occupation, arg_min(form, pos) FROM _select_found "
        "WHERE occupation IS NOT NULL GROUP BY ALL ORDER BY caption_id, min(pos)"
    ).fetchall()
    keep = [
        r[0] for r in con.execute("SELECT caption_id FROM _select_candidates ORDER BY 1").fetchall()
    ]
    return rows, keep


def _found(matcher, texts: pa.Array) -> tuple[list[tuple], list[int]]:
    f = HyperscanMatcher(matcher).find(texts)
    rows = [
        (int(r), matcher.forms[i][1], matcher.forms[i][0])
        for r, i in zip(f.mention_rows, f.mention_forms, strict=True)
    ]
    return rows, f.keep.tolist()


HARD = [
    "doctor",  # a form filling the whole caption, at the buffer's first byte
    "Teachers' lounge and a teacher",
    "schoolteacher internal cookbook",  # near misses only
    None,
    "",
    "nurse\x00doctor",  # a NUL inside a caption is a character like any other
    "a doctor\nnurse",
    "chief executive officer and chief-executive-officers",
    "Prime \u00a0 Minister  prime-minister",
    "police officer officers",  # overlapping forms: the longest at the leftmost place wins
    "老师teacher",
    "x" * 300 + " CEO",
    "COO\u212a and \u017feamstress",  # KELVIN SIGN, long s: simple case folding only
    "nurse",  # a form at the buffer's last byte
]


def _nulls_with_bytes() -> pa.Array:
    """A string array whose null slot still holds bytes (allowed by Arrow)."""
    values = b"doctorteacher"
    offsets = np.array([0, 6, 13], dtype=np.int32)
    validity = pa.array([True, False]).buffers()[1]
    return pa.StringArray.from_buffers(2, pa.py_buffer(offsets), pa.py_buffer(values), validity)


@pytest.mark.parametrize(
    "make",
    [
        lambda: pa.array(HARD, pa.string()),
        lambda: pa.array(HARD, pa.string()).slice(1, 10),  # offset into the buffers
        lambda: pa.array(HARD, pa.large_string()),
        lambda: pa.array([], pa.string()),
        lambda: pa.array([None, None], pa.string()),
        _nulls_with_bytes,
    ],
    ids=["hard", "sliced", "large_string", "empty", "all_null", "null_with_bytes"],
)
def test_matcher_equals_duckdb_on_hard_arrays(lexicon_matcher, make) -> None:
    texts = make()
    ref = _reference(lexicon_matcher, texts.cast(pa.string()))
    assert _found(lexicon_matcher, texts) == ref
    if len(texts) == len(HARD):
        assert len(ref[0]) >= 11  # the cases above do produce mentions


def test_matcher_equals_duckdb_on_real_captions_with_their_order(
    lexicon_matcher, shared_data
) -> None:
    """Row for row and in order (row, then first appearance) on the real CC3M captions."""
    texts = pq.read_table(shared_data / "cc3m_val_captions.parquet", columns=["caption"])
    texts = texts.column(0).combine_chunks()
    ref = _reference(lexicon_matcher, texts)
    assert len(ref[0]) > 500
    assert _found(lexicon_matcher, texts) == ref


def test_an_array_matched_slice_by_slice_gives_the_whole_array_s_triples(
    lexicon_matcher, shared_data, monkeypatch
) -> None:
    """``find`` joins and scans ``SLICE_ROWS`` rows at a time (memory): with slices of 3
    rows (hard arrays, one of them an offset slice itself, nulls holding bytes) and of 997
    (the real CC3M captions), the rows, forms and order are the whole array's."""
    cc3m = pq.read_table(shared_data / "cc3m_val_captions.parquet", columns=["caption"])
    cases = [
        (3, pa.array(HARD * 3, pa.string())),
        (3, pa.array(HARD * 3, pa.string()).slice(2, 30)),
        (1, _nulls_with_bytes()),
        (997, cc3m.column(0).combine_chunks()),
    ]
    for slice_rows, texts in cases:
        ref = _reference(lexicon_matcher, texts)
        monkeypatch.setattr(multimatch, "SLICE_ROWS", slice_rows)
        assert len(texts) > slice_rows
        assert _found(lexicon_matcher, texts) == ref
        monkeypatch.undo()
    assert len(ref[0]) > 500


OVERLAP_LEXICON = """occupation,article,display,forms
prime minister,a,prime minister,prime minister|prime ministers
minister,a,minister,minister|ministers
officer,an,officer,officer|officers|chief executive officer
executive,an,executive,executive|executives
ärztin,,Ärztin,ärztin|ärztinnen|kinderärztin
"""


def test_overlapping_forms_and_consumed_guards_follow_re2(tmp_path) -> None:
    """Forms inside longer forms (RE2 keeps the leftmost, then the first alternative, and
    searches on from its end) and guards that consume the character a next match needs
    (``Ärztin ärztin``: RE2 finds the first only): the rows of DuckDB's extraction."""
    lex = tmp_path / "occupations.csv"
    lex.write_text(OVERLAP_LEXICON, encoding="utf-8")
    matcher = build_matcher(load_occupations(str(lex)))
    texts = pa.array(
        [
            "the prime minister and a minister",
            "Ministers meet prime  ministers",
            "a chief executive officer, an executive officer",
            "executive chief executive officer",
            "Ärztin ärztin",
            "Kinderärztin und Ärztinnen, ärztin.",
            "ministerial primeminister",
        ]
    )
    ref = _reference(matcher, texts)
    assert _found(matcher, texts) == ref
    assert (0, "minister", "minister") in ref[0] and (2, "executive", "executive") in ref[0]
    assert len(ref[0]) >= 9
