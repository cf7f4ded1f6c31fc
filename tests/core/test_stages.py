"""The stage skeleton: the catalogue (corpus_audit/core/catalogue.py) is consistent with the schema,
the config classes and the code, and `status` flags a stage whose config or inputs changed.

The catalogue checks read the schema files and the config dataclasses here, with their own
parsing, not through the helpers under test. The status checks run the real `select`,
`indicators` (words and pronouns) and `neighbors` (SBERT + FAISS) through the CLI on real
LAION captions (two occupations), then add real COCO captions to the corpus.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from corpus_audit.cli import main
from corpus_audit.core.catalogue import (
    COMMAND_STAGES,
    ON_DEMAND,
    OTHER_WRITERS,
    RUN_ORDERS,
    STAGE_NAMES,
    STAGES,
    data_flow,
)
from corpus_audit.core.config import StudyConfig, load_config, write_config
from corpus_audit.core.errors import ConfigError, CorpusAuditError
from corpus_audit.core.registry import Registry
from corpus_audit.tables.analysis import ANALYSIS_TABLES

REPO = Path(__file__).resolve().parents[2]
DECLARATIONS = [spec for _, spec in STAGES.items()]


def _schema_tables() -> set[str]:
    """Every table the schema files create, read from the files themselves."""
    tables = set()
    for path in sorted((REPO / "corpus_audit" / "sql" / "schema").glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        tables |= set(re.findall(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", text, re.I))
    return tables


def _config_keys() -> dict[str, set[str]]:
    """section -> its keys, from the config dataclasses."""
    out = {}
    config = StudyConfig()
    for f in dataclasses.fields(config):
        section = getattr(config, f.name)
        if dataclasses.is_dataclass(section):
            out[f.name] = {g.name for g in dataclasses.fields(section)}
    return out


# -- the catalogue --------------------------------------------------------------------------
def _order(name: str) -> list[str]:
    """The run order that runs stage ``name`` (the amplification audit's, or the PST's); an
    on-demand stage (``recaption``) is placed as if it ran last, after everything it reads; a
    stage a command runs (``battles_import``) too, after the command stages it needs or reads."""
    for order in RUN_ORDERS.values():
        if name in order:
            return order
    if name in COMMAND_STAGES:
        spec = STAGES.get(name)
        before = [n for n in COMMAND_STAGES if n in spec.needs or n in spec.after]
        return [*RUN_ORDERS["amplification"], *before, name]
    assert name in ON_DEMAND, name
    return [*RUN_ORDERS["amplification"], name]


def _last(order: list[str], name: str) -> int:
    """The last position of stage ``name`` in ``order`` (label runs twice)."""
    return len(order) - 1 - order[::-1].index(name)


def test_every_stage_runs_in_order_and_only_after_what_it_needs():
    scheduled = {n for order in RUN_ORDERS.values() for n in order}
    assert scheduled | set(ON_DEMAND) == set(STAGE_NAMES)
    assert not scheduled & set(ON_DEMAND)
    for spec in DECLARATIONS:
        order = _order(spec.name)
        for before in spec.needs:  # needed: before its first run
            assert order.index(before) < order.index(spec.name), (spec.name, before)
        for before in spec.after:  # read when they ran: before its last run (if in this order)
            assert before in STAGES, (spec.name, before)
            if before in order:
                assert order.index(before) < _last(order, spec.name), (spec.name, before)


@pytest.mark.parametrize("spec", DECLARATIONS, ids=lambda s: s.name)
def test_every_table_a_stage_reads_is_written_before_it_runs(spec):
    """By a stage that comes earlier in its `corpus-audit run` (a table written later, like
    `training_subsets` by analyze, cannot be an input of generate), never by itself only. A
    stage of both run orders (generate, label) may read a table of either order's stages."""
    orders = [o for o in RUN_ORDERS.values() if spec.name in o] or [_order(spec.name)]
    for table in spec.reads:
        earlier = [
            s.name
            for s in DECLARATIONS
            for order in orders
            if table in s.writes
            and s.name != spec.name
            and s.name in order
            and order.index(s.name) < _last(order, spec.name)
        ] + [s.name for s in DECLARATIONS if s.name in ON_DEMAND and s.name in spec.after]
        earlier = [n for n in earlier if table in STAGES.get(n).writes]
        assert earlier, f"{spec.name} reads {table}, which no earlier stage writes"
        assert table not in OTHER_WRITERS


def test_the_stages_and_the_other_writers_cover_the_schema():
    written = {t for s in DECLARATIONS for t in s.writes}
    schema = _schema_tables()
    assert "amplification" in schema and "stage_runs" in schema  # the parsing found them
    assert written | set(OTHER_WRITERS) == schema
    assert not written & set(OTHER_WRITERS)
    for table, target in OTHER_WRITERS.items():
        module, attr = target.split(":")
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        assert callable(obj), table


def test_shared_tables_say_whose_rows_are_whose():
    for spec in DECLARATIONS:
        assert set(spec.owns) <= set(spec.writes), spec.name
    for table in {t for s in DECLARATIONS for t in s.writes}:
        writers = [s for s in DECLARATIONS if table in s.writes]
        if len(writers) > 1:
            assert all(table in s.owns for s in writers), table
            assert len({s.owns[table] for s in writers}) == len(writers), table


@pytest.mark.parametrize("spec", DECLARATIONS, ids=lambda s: s.name)
def test_declared_config_keys_exist(spec):
    keys = _config_keys()
    assert spec.config, spec.name
    for name in spec.config:
        section, _, key = name.partition(".")
        assert section in keys, f"{spec.name}: no config section [{section}]"
        if key:
            assert key in keys[section], f"{spec.name}: no setting {name}"
    StudyConfig().section_hash(*spec.config)  # the hash status recomputes


@pytest.mark.parametrize("spec", DECLARATIONS, ids=lambda s: s.name)
def test_every_target_imports_and_takes_the_stage_signature(spec):
    module, func = spec.target.split(":")
    fn = getattr(importlib.import_module(module), func)
    assert callable(fn)
    params = inspect.signature(fn).parameters
    assert list(params)[0] == "study"
    assert params["progress"].kind is inspect.Parameter.KEYWORD_ONLY
    assert spec.summary and spec.steps


def test_registry_names_the_known_entries():
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    reg.add("b")(2)
    assert reg.get("b") == 2 and reg.names() == ("a", "b") and "a" in reg
    with pytest.raises(ConfigError, match=r"unknown widget 'c' \(known: a, b\)") as err:
        reg.get("c")
    assert isinstance(err.value, CorpusAuditError)
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("a", 3)
    with pytest.raises(ConfigError, match="unknown stage 'selekt'"):
        STAGES.get("selekt")


def test_architecture_page_shows_the_current_data_flow():
    """The picture in docs/architecture.md is `python -m corpus_audit.core.catalogue`'s output."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = page.index("<!-- data-flow: start -->")
    block = page[start : page.index("<!-- data-flow: end -->")]
    body = block.split("```text\n", 1)[1].split("```", 1)[0]
    assert body == data_flow(), (
        "run `python -m corpus_audit.core.catalogue` and paste it into the page"
    )
    for spec in DECLARATIONS:  # every stage and every table it writes is in the picture
        assert re.search(rf"^{spec.name} +─", body, re.M), spec.name
        for table in spec.writes:
            assert f" {table} " in body, table


# -- status on a real study -----------------------------------------------------------------
OCCUPATIONS = ("nurse", "teacher")


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory, laion_path, coco_path) -> Path:
    """A study over real LAION captions (two occupations) after select, indicators, neighbors;
    ``coco.parquet`` beside it holds 400 real COCO captions to add to the corpus later."""
    import duckdb

    root = tmp_path_factory.mktemp("stages")
    builtin = REPO / "corpus_audit/methods/lexicon/data/occupations_en.csv"
    with builtin.open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["occupation"] in OCCUPATIONS]
    with (root / "occupations.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    duckdb.connect().execute(
        "COPY (SELECT caption, coco_url AS url FROM read_parquet(?) "
        "WHERE regexp_matches(lower(caption), '\\b(nurse|teacher)s?\\b') LIMIT 400) TO ? "
        "(FORMAT parquet)",
        [str(coco_path), str(root / "coco.parquet")],
    )
    study = root / "study"
    assert main(["init", str(study), "--corpus", str(laion_path), "--sample-size", "5",
                 "--occupations", str(root / "occupations.csv")]) == 0  # fmt: skip
    config = load_config(study)
    config.indicators.use_names = False  # words and pronouns: no spaCy model to load
    config.neighbors.k = 5
    config.neighbors.cache_dir = str(root / "cache")
    write_config(config)
    assert main(["-q", "run", str(study), "--until", "neighbors"]) == 0
    return study


def _notes(study: Path) -> dict[str, str]:
    from corpus_audit.core.pipeline import status
    from corpus_audit.core.store import Study

    with Study.open(study) as s:
        return {row.stage: row.note for row in status(s)}


def _edit(study: Path, **values: object) -> None:
    """Set ``section.key`` values in study.toml (``images__max_pixels=...``)."""
    config = load_config(study)
    for name, value in values.items():
        section, key = name.split("__")
        setattr(getattr(config, section), key, value)
    write_config(config)


def _query_one(study: Path, sql: str) -> object:
    import duckdb

    with duckdb.connect(str(study / "study.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()[0][0]


def _rows(study: Path, table: str) -> list[tuple]:
    import duckdb

    with duckdb.connect(str(study / "study.duckdb"), read_only=True) as con:
        return sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def test_a_fresh_run_is_current(study_dir):
    notes = _notes(study_dir)
    assert [notes[n] for n in ("select", "indicators", "neighbors")] == ["", "", ""]


def test_a_run_records_the_fingerprints_of_its_declared_inputs(study_dir):
    """neighbors' provenance: [rows, hash] of each table it declares it reads (not those it
    also writes), taken when it started; nothing has changed them since."""
    import json

    provenance = _query_one(
        study_dir,
        "SELECT provenance FROM stage_runs WHERE stage = 'neighbors' ORDER BY finished_at DESC",
    )
    inputs = json.loads(provenance)["inputs"]
    assert set(inputs) == {"captions", "mentions", "prompts", "indicators"}
    for table, (rows, digest) in inputs.items():
        assert rows == len(_rows(study_dir, table)) > 0, table
        assert isinstance(digest, str) and digest != "0"


def test_select_again_on_a_changed_corpus_flags_what_read_its_tables(study_dir, capsys):
    before = {t: _rows(study_dir, t) for t in ("captions", "mentions", "prompts", "indicators")}
    config = load_config(study_dir)
    _edit(study_dir, corpus__paths=[*config.corpus.paths, str(study_dir.parent / "coco.parquet")])
    assert main(["-q", "select", str(study_dir)]) == 0
    after = {t: _rows(study_dir, t) for t in before}
    changed = [t for t in before if before[t] != after[t]]
    assert changed == ["captions", "mentions"]  # the same lexicon: the same prompts
    notes = _notes(study_dir)
    assert notes["select"] == ""
    # the changed tables, alphabetically (indicators also groups captions by corpus file)
    for stage, tables in (
        ("indicators", "captions, corpus_files, mentions"),
        ("neighbors", "captions, mentions"),
    ):
        assert notes[stage] == f"inputs changed since this run ({tables}): rerun to update", stage
    capsys.readouterr()
    assert main(["status", str(study_dir)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("neighbors"))
    assert "inputs changed since this run (captions, mentions): rerun to update" in line

    # indicators again: it is current, and neighbors now also sees the new indicators
    assert main(["-q", "indicators", str(study_dir)]) == 0
    notes = _notes(study_dir)
    assert notes["indicators"] == ""
    assert notes["neighbors"] == (
        "inputs changed since this run (captions, indicators, mentions): rerun to update"
    )
    assert main(["-q", "neighbors", str(study_dir)]) == 0
    assert _notes(study_dir)["neighbors"] == ""


def test_select_again_on_the_same_corpus_leaves_the_others_current(study_dir):
    assert main(["-q", "select", str(study_dir)]) == 0
    notes = _notes(study_dir)
    assert re.fullmatch(
        r"rerun \S+ \S+ skipped: corpus, lexicon and settings unchanged since the last run",
        notes["select"],
    )  # status keeps the counts of the run that selected; the skip is in the note
    assert [notes[n] for n in ("indicators", "neighbors")] == ["", ""]


def test_a_setting_of_another_section_that_a_stage_declares_flags_it(study_dir):
    """label declares images.max_pixels (it decodes within that budget), not the rest of
    [images]; a setting no stage declares flags nothing."""
    assert main(["-q", "label", str(study_dir)]) == 0  # no images yet: a skipped run
    assert "changed" not in _notes(study_dir)["label"]
    _edit(study_dir, images__scope="captions")  # read by `images` only
    assert "config changed" not in _notes(study_dir)["label"]
    _edit(study_dir, images__max_pixels=1_000_000)
    notes = _notes(study_dir)
    assert (
        "config changed since this run (study.toml: images.max_pixels): rerun to update"
        in notes["label"]
    )
    assert "config changed" not in notes["neighbors"]
    _edit(study_dir, images__max_pixels=StudyConfig().images.max_pixels)
    assert "config changed" not in _notes(study_dir)["label"]
    _edit(study_dir, neighbors__k=6)  # neighbors' own section
    notes = _notes(study_dir)
    assert "config changed since this run" in notes["neighbors"]
    assert "config changed" not in notes["label"]
    _edit(study_dir, neighbors__k=5, images__scope="samples")


def test_the_architecture_page_s_example_stage_runs(study_dir, tmp_path, monkeypatch):
    """The three blocks of "How to add a stage", run as written on a copy of the study:
    the schema, the module, the declaration; then the stage and `status`."""
    import shutil
    import sys
    import types

    import corpus_audit.core.catalogue as catalogue
    import corpus_audit.core.pipeline as pipeline
    import corpus_audit.core.stage_runner as stage_runner
    import corpus_audit.core.stage_state as stage_state
    from corpus_audit.core.catalogue import Stage
    from corpus_audit.core.pipeline import stage_function, status
    from corpus_audit.core.store import Study

    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = page.index("<!-- example-stage: start -->")
    section = page[start : page.index("<!-- example-stage: end -->")]
    schema, module_code, declaration = re.findall(r"```(?:sql|python)\n(.*?)```", section, re.S)

    copy = tmp_path / "study"
    shutil.copytree(study_dir, copy)
    registry = Registry("stage")
    for name, spec in STAGES.items():
        registry.register(name, spec)
    module = types.ModuleType("corpus_audit.stages.caption_lengths")
    exec(compile(module_code, "caption_lengths.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "corpus_audit.stages.caption_lengths", module)
    exec(declaration, {"declare": lambda s: registry.register(s.name, s), "Stage": Stage})
    # as if the catalogue held it
    for holder in (catalogue, pipeline, stage_state):
        monkeypatch.setattr(holder, "STAGES", registry)
        monkeypatch.setattr(holder, "STAGE_NAMES", list(registry.names()))
    monkeypatch.setattr(stage_runner, "STAGES", registry)

    with Study.open(copy) as study:
        study.con.execute(schema)
        run = stage_function("caption_lengths")(study, progress=False)
        got = study.con.execute(
            "SELECT occupation, n_captions, mean_chars FROM caption_lengths ORDER BY 1"
        ).fetchall()
        pairs = study.con.execute(
            "SELECT m.occupation, c.text FROM mentions m JOIN captions c USING (caption_id)"
        ).fetchall()
        want = {}
        for occupation, text in pairs:
            want.setdefault(occupation, []).append(len(text))
        assert [(o, n) for o, n, _ in got] == [(o, len(v)) for o, v in sorted(want.items())]
        for occupation, _, mean in got:
            assert mean == pytest.approx(sum(want[occupation]) / len(want[occupation]))
        assert run.rows_out == len(got) and run.rows_in == len(pairs)
        notes = {row.stage: row for row in status(study)}
        assert notes["caption_lengths"].status == "done" and notes["caption_lengths"].note == ""
        study.config.select.sample_size = 7  # its declared [select] changed
        assert (
            "config changed since this run"
            in {r.stage: r for r in status(study)}["caption_lengths"].note
        )


def test_the_analysis_tables_are_what_analyze_declares() -> None:
    """tables/analysis.py's names (report, fingerprint, the stage's rewrite) are the
    catalogue's ``writes`` of ``analyze``, none missing, none extra."""
    assert len(set(ANALYSIS_TABLES)) == len(ANALYSIS_TABLES)
    assert set(ANALYSIS_TABLES) == set(STAGES.get("analyze").writes)
