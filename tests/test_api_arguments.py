"""The API's arguments, checked (issue 44: M13, M14, M15 and the Low items): a single path
where a list is expected is one path, a wrong type is one CorpusAuditError naming the
argument, `amplify` bounds its replicates and counts, `Study.set` takes plain values under
`section.key` keys only, a handle re-reads its config before a run, and a handle used from
two threads at once refuses the second instead of a DuckDB error."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

import pytest

import corpus_audit.api as api
from corpus_audit import CorpusAuditError, Study, amplify, published_tables
from corpus_audit.cli import main
from corpus_audit.core.config_edit import set_config
from corpus_audit.core.store import StageRun

COCO = Path(__file__).resolve().parents[1] / "corpus_audit/demo_data/coco_val2017_captions.parquet"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("api_args") / "study"
    with Study.create(root, [COCO]) as made:
        yield made


def test_a_single_path_where_a_list_is_expected_is_one_path(tmp_path):
    """Before: the str was read character by character ("/: no such corpus file")."""
    with Study.create(tmp_path / "one", str(COCO)) as made:
        assert made.config["corpus"]["paths"] == [str(COCO.resolve())]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda s: s.run(3), "run: stage"),
        (lambda s: s.run("select", progress="yes"), "run: progress"),
        (lambda s: s.table(3), "table: name"),
        (lambda s: s.export(tables=3), "export: tables"),
        (lambda s: s.export(tables=[1]), "export: tables[0]"),
        (lambda s: s.import_images(3), "import_images: sources"),
        (lambda s: s.import_images([Path("a"), 3]), "import_images: sources[1]"),
        (lambda s: s.set(["label.threshold"]), "set: settings is list"),
        (lambda s: Study.open(3), "open: root"),
        (lambda s: Study.create(s.root.parent / "x", 5), "create: corpus"),
        (lambda s: Study.create(s.root.parent / "x", [COCO], settings=[1]), "create: settings"),
        (lambda s: amplify(["x.csv"]), "amplify: tables must be a mapping"),
        (lambda s: amplify({"m": ["a", "b"]}), "amplify: tables['m']"),
    ],
)
def test_a_wrong_argument_type_is_one_error_naming_it(study, call, named):
    with pytest.raises(CorpusAuditError) as info:
        call(study)
    assert str(info.value).startswith(named) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"replicates": 50_000_000}, "replicates 50000000 is not in [1, 100,000]"),
        ({"replicates": -1}, "replicates -1 is not in [1, 100,000]"),
        ({"replicates": 0}, "replicates 0 is not in [1, 100,000]"),
        ({"replicates": 2.5}, "replicates must be a whole number"),
        ({"training_n": -3}, "training_n (--training-n) -3 is not >= 1"),
        ({"seed": -1}, "seed -1 is not >= 0"),
    ],
)
def test_amplify_bounds_its_counts_before_reading_anything(tmp_path, options, said):
    with pytest.raises(CorpusAuditError) as info:
        amplify(published_tables(), out=tmp_path / "out", **options)
    assert said in str(info.value)
    assert not (tmp_path / "out").exists()


def test_amplify_cli_refuses_a_negative_training_n(tmp_path, capfd):
    table = next(iter(published_tables().values()))
    out = tmp_path / "out"
    code = main(["amplify", "--table", str(table), "--training-n", "-3", "--out", str(out)])
    _, err = capfd.readouterr()
    assert code == 2 and err.count("\n") == 1 and "--training-n" in err
    assert not out.exists()  # nothing written (before: -3 in the CSVs, then a traceback)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"label.threshold": None}, "label.threshold: NoneType is not a setting value"),
        ({"label.threshold": b"0.8"}, "label.threshold: bytes is not a setting value"),
        ({"label.threshold": {0.8}}, "label.threshold: set is not a setting value"),
        ({"study.name": datetime.date(2026, 1, 1)}, "study.name: date is not a setting value"),
        ({"label.classifier": {"a": 1}}, "label.classifier: expected str, got dict"),
        ({"label.threshold=0.7 #": 0.8}, "'label.threshold=0.7 #': a setting is named section.key"),
        ({"label.threshold\n": 0.8}, "a setting is named section.key"),
        ({3: 0.8}, "3: a setting is named section.key"),
    ],
)
def test_study_set_refuses_what_toml_would_not_give_back(study, settings, said):
    before = (study.root / "study.toml").read_bytes()
    with pytest.raises(CorpusAuditError) as info:
        study.set(settings)
    assert said in str(info.value) and "\n" not in str(info.value)
    assert (study.root / "study.toml").read_bytes() == before
    assert study.config["label"]["threshold"] == 0.9


def test_a_handle_reads_the_config_again_before_a_run(study):
    # as `corpus-audit config set` would, while the handle is open: the first 3 captions
    set_config(study.root, ["select.sample_size=3", "select.sample_unit=captions"])
    (run,) = study.run("select", progress=False)
    assert not run.skipped
    per_occupation = study.table("samples").groupby(["occupation", "strategy"]).size()
    assert per_occupation.max() <= 3  # before: 500 x 8 candidates, the handle's old config
    assert study.config["select"]["sample_size"] == 3


def test_a_handle_used_from_two_threads_refuses_the_second(study, monkeypatch):
    inside, leave = threading.Event(), threading.Event()

    def held(core, *, progress=True):
        inside.set()
        leave.wait(10)
        return StageRun("select", skipped=True)

    monkeypatch.setattr(api, "stage_function", lambda name: held)
    worker = threading.Thread(target=lambda: study.run("select", progress=False))
    worker.start()
    try:
        assert inside.wait(10)
        with pytest.raises(CorpusAuditError, match=r"in use by another thread \(run\)"):
            study.table("captions")
    finally:
        leave.set()
        worker.join(10)
    assert len(study.table("captions")) > 0  # free again once the run returned
