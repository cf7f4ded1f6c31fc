"""What a plugin returns is checked where it comes back (issue 44, H1, H2, M3): a classifier's
NaN / infinite / out-of-range p_female and an embedder's NaN / infinite / zero vectors are
one line naming the plugin and its distribution, and nothing is stored or cached.

The plugins are real distributions as pip leaves them (``dist-info`` with ``entry_points.txt``
in a folder put on ``sys.path``, the suite's way: ``tests/core/test_registries.py``); the
label stage runs with the real MediaPipe detector on real photos."""

from __future__ import annotations

import re
import signal
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from image_fixtures import encode, photo

from corpus_audit import Study
from corpus_audit.backends import classifiers, embeddings
from corpus_audit.core.errors import BackendOutputError, CorpusAuditError
from corpus_audit.core.registry import Registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_registries import _dist_info as dist_info  # noqa: E402  (the suite's way)

_COUNTER = iter(range(10_000))


def install(
    monkeypatch, tmp_path: Path, group: str, name: str, code: str, dist: str = "bad-plugin"
) -> str:
    """A plugin ``name`` in ``group`` whose module is ``code`` (its ``BACKEND`` the entry),
    declared by the distribution ``dist`` 0.1, on ``sys.path`` for this test; returns the
    module name (fresh each call)."""
    module = f"boundary_plugin_{next(_COUNTER)}"
    site = tmp_path / f"site_{module}"
    site.mkdir()
    (site / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    dist_info(site, dist, "0.1", group, {name: f"{module}:BACKEND"})
    monkeypatch.syspath_prepend(str(site))
    return module


def fresh(monkeypatch, module, attr: str) -> Registry:
    """The module's registry, copied with its built-ins and plugins not looked for yet."""
    original: Registry = getattr(module, attr)
    expects = getattr(original, "expects", None)  # what its plugins must name
    copy: Registry = (
        Registry(original.kind, original.group, expects)
        if expects
        else Registry(original.kind, original.group)
    )
    for known, value in original.items():
        if original.plugin(known) is None:
            copy.register(known, value)
    monkeypatch.setattr(module, attr, copy)
    return copy


CLASSIFIER = """
import numpy as np
from corpus_audit import ClassifierBackend

class Model:
    id = "bad:1"
    provenance = {{"classifier": "bad:1"}}

    def p_female(self, images, faces):
        return {value}

    def close(self):
        pass

BACKEND = ClassifierBackend(lambda label, **kw: Model(), lambda label: "bad:1")
"""


@pytest.fixture
def photo_study(make_study, tmp_path):
    """A study with two portraits in ``images`` (as generate registers its images)."""
    study = make_study(
        [
            Path(__file__).resolve().parents[2]
            / "corpus_audit/demo_data/coco_val2017_captions.parquet"
        ],
        label={"face_model": "full_range", "classifier": "agegender"},
    )
    for i, name in enumerate(("astronaut", "grace")):
        path = study.path("images", "generated", "m", f"{name}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode(photo(name), "PNG"))
        study.con.execute(
            "INSERT INTO images (image_id, source, prompt_id, occupation, path, model_id, seed) "
            "VALUES (?, 'generated', 'direct:1:nurse', 'nurse', ?, 'm', ?)",
            [f"gen:m:{name}", f"images/generated/m/{name}.png", i],
        )
    return study


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("np.full(len(images), np.nan)", "nan"),
        ("np.full(len(images), np.inf)", "inf"),
        ("np.full(len(images), 5.0)", "5.0"),
        ("np.full(len(images), -2.0)", "-2.0"),
        ("[0.5] * (len(images) + 1)", "a list of 3 items for 2 images"),
        ("None", "returned None"),
        ("['0.5'] * len(images)", "<U3 values, not numbers"),
    ],
)
def test_a_classifier_plugin_s_bad_value_is_one_line_and_nothing_is_stored(
    monkeypatch, tmp_path, photo_study, value, shown
):
    from corpus_audit.stages.label import label

    install(
        monkeypatch, tmp_path, "corpus_audit.classifiers", "bad", CLASSIFIER.format(value=value)
    )
    fresh(monkeypatch, classifiers, "CLASSIFIERS")
    photo_study.config.label.classifier = "bad"
    with pytest.raises(BackendOutputError) as info:
        label(photo_study, progress=False)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "classifier plugin 'bad' (bad-plugin 0.1, entry point group corpus_audit.classifiers)"
    )
    assert shown in message
    assert photo_study.count("labels") == 0  # nothing stored (before: NaN -> 0.0 'male')


def test_a_classifier_plugin_raising_mid_run_is_one_line_naming_it(
    monkeypatch, tmp_path, photo_study
):
    from corpus_audit.stages.label import label

    code = CLASSIFIER.format(value="{}['missing']")
    install(monkeypatch, tmp_path, "corpus_audit.classifiers", "bad", code)
    fresh(monkeypatch, classifiers, "CLASSIFIERS")
    photo_study.config.label.classifier = "bad"
    with pytest.raises(
        BackendOutputError,
        match=r"^classifier plugin 'bad' \(bad-plugin 0\.1.*"
        r"p_female raised KeyError: 'missing'",
    ):
        label(photo_study, progress=False)
    assert photo_study.count("labels") == 0


EMBEDDER = """
import numpy as np

class Model:
    model_id = fingerprint = "bad-embedder"
    dim = 4
    device = "cpu"
    precision = "fp32"
    n_encoded = 0

    def encode(self, texts):
        return {value}

    def provenance(self):
        return {{"model": "bad"}}

    def close(self):
        pass

def BACKEND(model, **kw):
    return Model()
"""


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("np.full((len(texts), 4), np.nan)", "NaN or infinite values for text 1 of 3"),
        ("np.full((len(texts), 4), np.inf)", "NaN or infinite values for text 1 of 3"),
        ("np.zeros((len(texts), 4))", "a zero vector for text 1 of 3"),
        ("np.ones((len(texts), 5))", "expected (3, 4)"),
        ("np.ones((len(texts) - 1, 4))", "expected (3, 4)"),
    ],
)
def test_an_embedder_plugin_s_bad_vectors_never_reach_the_cache(
    monkeypatch, tmp_path, value, shown
):
    install(monkeypatch, tmp_path, "corpus_audit.embedders", "bad", EMBEDDER.format(value=value))
    fresh(monkeypatch, embeddings, "EMBEDDERS")
    monkeypatch.setattr(embeddings, "_LOADED", {})
    cache = embeddings.EmbeddingCache(tmp_path / "cache", "bad-embedder")
    with pytest.raises(BackendOutputError) as info:
        embeddings.embed_with_cache(
            ["a nurse", "a doctor", "a chef"],
            cache,
            lambda: embeddings.load_embedder("m", backend="bad", device="cpu"),
        )
    message = str(info.value)
    assert "\n" not in message and shown in message
    assert message.startswith("embedder plugin 'bad' (bad-plugin 0.1, entry point group")
    assert cache.key_files() == [] and not list(cache.dir.glob("*.npy"))  # nothing cached


def test_an_embedder_plugin_s_unnormalised_vectors_are_normalised_with_a_note(
    monkeypatch, tmp_path, caplog
):
    install(
        monkeypatch,
        tmp_path,
        "corpus_audit.embedders",
        "big",
        EMBEDDER.format(
            value="np.arange(1, 4 * len(texts) + 1, dtype=float).reshape(-1, 4) * 1000"
        ),
    )
    fresh(monkeypatch, embeddings, "EMBEDDERS")
    monkeypatch.setattr(embeddings, "_LOADED", {})
    embedder = embeddings.load_embedder("m", backend="big", device="cpu")
    vectors = embedder.encode(["a", "b"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert embedder.provenance()["renormalised_vectors"] == 2
    assert "not of unit length; normalised" in caplog.text


def test_the_cache_refuses_non_finite_and_zero_rows(tmp_path):
    cache = embeddings.EmbeddingCache(tmp_path, "fp", dim=2)
    for bad in ([[np.nan, 1.0]], [[np.inf, 0.0]], [[0.0, 0.0]]):
        with pytest.raises(CorpusAuditError, match="refused to cache"):
            cache.add(["k"], np.asarray(bad, dtype=np.float32))
    assert cache.key_files() == [] and not list(cache.dir.glob("*.npy"))


def test_a_plugin_naming_a_non_backend_object_is_one_line(monkeypatch, tmp_path, photo_study):
    from corpus_audit.stages.label import label

    install(monkeypatch, tmp_path, "corpus_audit.classifiers", "bad", "BACKEND = 42\n")
    fresh(monkeypatch, classifiers, "CLASSIFIERS")
    photo_study.config.label.classifier = "bad"
    with pytest.raises(CorpusAuditError, match=r"names 42, not a corpus_audit\.ClassifierBackend"):
        label(photo_study, progress=False)
    assert "bad" not in sys.modules


def fresh_all(monkeypatch) -> None:
    """Every plugin registry fresh (plugins looked for again on first use)."""
    import importlib

    from corpus_audit.core.registry import PLUGIN_GROUPS

    for spec in PLUGIN_GROUPS.values():
        module, _, attr = spec.partition(":")
        fresh(monkeypatch, importlib.import_module(module), attr)


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit: exit status 3"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt: (no message)"),
        ("class Stop(BaseException):\n    pass\nraise Stop('stop here')\n", "Stop: stop here"),
    ],
)
def test_a_plugin_ending_the_process_on_import_is_its_own_one_line_error(
    monkeypatch, tmp_path, capfd, photo_study, code, said
):
    """M2: `plugins` lists the others and exits 2 with one line naming the plugin (before:
    exit 3 with no output, or "interrupted"); the API's plugins() returns; label is one line."""
    from corpus_audit import plugins
    from corpus_audit.cli import main
    from corpus_audit.stages.label import label

    install(monkeypatch, tmp_path, "corpus_audit.classifiers", "quits", code)
    install(
        monkeypatch,
        tmp_path,
        "corpus_audit.embedders",
        "fine",
        EMBEDDER.format(value="1"),
        "ok-plugin",
    )
    fresh_all(monkeypatch)
    status = main(["plugins"])
    out, err = capfd.readouterr()
    assert status == 2
    lines = out.splitlines()
    assert any(
        line.startswith("corpus_audit.embedders  fine  ok-plugin 0.1") and line.endswith("  ok")
        for line in lines
    )
    assert any(
        line.startswith("corpus_audit.classifiers  quits") and line.endswith("FAILED")
        for line in lines
    )
    assert err.count("\n") == 1 and err.startswith(
        "error: classifier plugin 'quits' (bad-plugin 0.1"
    )
    assert said in err
    fresh_all(monkeypatch)
    by_name = {s.plugin.name: s.error for s in plugins()}  # no SystemExit out of the API
    assert by_name["fine"] == "" and said in by_name["quits"]
    fresh_all(monkeypatch)
    photo_study.config.label.classifier = "quits"
    with pytest.raises(CorpusAuditError, match=re.escape(said)):
        label(photo_study, progress=False)
    assert photo_study.count("labels") == 0


@pytest.mark.parametrize(
    ("handler", "escapes"),
    [(signal.SIG_IGN, False), (signal.SIG_DFL, False), (lambda signum, frame: None, True)],
    ids=["ignored", "default-action", "someone-elses"],
)
def test_a_plugin_s_own_keyboardinterrupt_under_each_sigint_disposition(
    monkeypatch, tmp_path, handler, escapes
):
    """Where SIGINT is ignored (a process started with ``cmd &`` by a script) or ends the
    process, no signal raises KeyboardInterrupt: a plugin's own is its one-line error. Under
    a handler someone else installed it may be their Ctrl-C, so it goes on up."""
    from corpus_audit import plugins

    install(monkeypatch, tmp_path, "corpus_audit.classifiers", "quits", "raise KeyboardInterrupt\n")
    fresh_all(monkeypatch)
    previous = signal.signal(signal.SIGINT, handler)
    try:
        if escapes:
            with pytest.raises(KeyboardInterrupt):
                plugins()
        else:
            by_name = {s.plugin.name: s.error for s in plugins()}
            assert "KeyboardInterrupt: (no message)" in by_name["quits"]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_two_distributions_declaring_one_name_are_both_listed(monkeypatch, tmp_path, capfd):
    from corpus_audit.cli import main

    code = CLASSIFIER.format(value="np.full(len(images), 0.5)")
    install(monkeypatch, tmp_path, "corpus_audit.classifiers", "same", code, "first-plugin")
    install(monkeypatch, tmp_path, "corpus_audit.classifiers", "same", code, "second-plugin")
    fresh_all(monkeypatch)
    status = main(["plugins"])
    out, err = capfd.readouterr()
    rows = [line for line in out.splitlines() if "  same  " in line]
    assert len(rows) == 2 and rows[0].endswith("ok") and rows[1].endswith("CLASH")
    assert status == 2 and err.count("\n") == 1
    dists = {rows[0].split("  ")[2].split()[0], rows[1].split("  ")[2].split()[0]}
    assert dists == {"first-plugin", "second-plugin"}
    assert "not used" in err and "declares the same name first" in err


def test_a_plugin_naming_a_non_backend_object_is_failed_in_plugins(monkeypatch, tmp_path, capfd):
    from corpus_audit.cli import main

    install(monkeypatch, tmp_path, "corpus_audit.corpus_readers", "notreader", "BACKEND = 'x'\n")
    install(monkeypatch, tmp_path, "corpus_audit.embedders", "notfactory", "BACKEND = 42\n", "p2")
    fresh_all(monkeypatch)
    status = main(["plugins"])
    out, err = capfd.readouterr()
    assert status == 2 and "ok" not in out.split()
    assert "names 'x', not a corpus reader" in err and "names 42, not an embedder factory" in err


def test_a_200000_character_plugin_name_is_cut_in_messages(monkeypatch, tmp_path, capfd):
    from corpus_audit.cli import main

    name = "n" * 200_000
    install(monkeypatch, tmp_path, "corpus_audit.classifiers", name, "raise ValueError('no')\n")
    fresh_all(monkeypatch)
    status = main(["plugins"])
    out, err = capfd.readouterr()
    assert status == 2
    assert max(len(line) for line in (out + err).splitlines()) < 1000
    assert "(200,000 characters)" in err


READER = """
from pathlib import Path

import pyarrow as pa

from corpus_audit.backends.corpus import FileInfo


class ArrowReader:
    name = "arrow"
    extensions = (".arrow",)

    def inspect(self, path):
        schema = pa.ipc.open_file(path).schema
        return FileInfo(list(schema.names), None, [None], types={f.name: f.type for f in schema})

    def read(self, path, unit, columns, batch_rows):
        reader = pa.ipc.open_file(path)
        start = 0
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            yield batch.select([c for c in columns.names() if c in batch.schema.names]), start
            start += batch.num_rows


BACKEND = ArrowReader()
"""


def test_a_corpus_reader_plugin_keeps_format_auto_working(monkeypatch, tmp_path, laion_path):
    """M1: with a reader plugin installed, format=auto still tells parquet by its name (before:
    AttributeError: 'str' object has no attribute 'extensions') and the plugin's extension."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from corpus_audit.backends import corpus

    install(monkeypatch, tmp_path, "corpus_audit.corpus_readers", "arrowplug", READER)
    fresh(monkeypatch, corpus, "READERS")
    (parquet,) = corpus.resolve_corpus([str(laion_path)])
    assert parquet.format == "parquet"
    table = pq.read_table(laion_path).slice(0, 50)
    with pa.ipc.new_file(tmp_path / "x.arrow", table.schema) as writer:
        writer.write_table(table)
    (arrow,) = corpus.resolve_corpus([str(tmp_path / "x.arrow")])
    assert arrow.format == "arrowplug"


TEXT_GENERATOR = """
from corpus_audit.backends.text_generators import Completion


class Model:
    name = "bad:m"

    def stream(self, requests):
        for i, r in enumerate(requests):
            yield {value}

    def describe(self):
        return {{"backend": "bad"}}

    def close(self):
        pass


def BACKEND(model, settings, **options):
    return Model()
"""


@pytest.mark.parametrize(
    ("value", "said", "stored"),
    [
        (
            "i, [Completion(f'text {{k}}', 'stop') for k in range(3 * r.n)]",
            "stream returned 6 texts for a request of 2",
            0,
        ),
        (
            "i, [Completion('t', 'stop', completion_tokens=-5) for k in range(r.n)]",
            "completion_tokens = -5, a negative count",
            0,
        ),
        ("i, [Completion(None, 'stop')] * r.n", "its text is None, not a str", 0),
        ("i, 'not a list'", "as the completions of request", 0),
        ("0, [Completion('t', 'stop')]", "yielded request 0 twice", 1),  # the first batch was fine
        ("i, [Completion('t', 'stop', prompt_tokens='12')]", "prompt_tokens = '12'", 0),
    ],
)
def test_a_text_generator_plugin_s_wrong_output_stores_nothing(
    monkeypatch, tmp_path, value, said, stored
):
    """M3, M4 through the llm_texts stage: one line naming the plugin, no text stored (before:
    72 texts stored instead of 24, negative token counts stored, tracebacks)."""
    from corpus_audit.backends import text_generators

    install(
        monkeypatch,
        tmp_path,
        "corpus_audit.text_generators",
        "bad",
        TEXT_GENERATOR.format(value=value),
    )
    fresh(monkeypatch, text_generators, "TEXT_GENERATORS")
    study = Study.create(
        tmp_path / "llm",
        kind="llm",
        models=["bad:m"],
        settings={"llm.n": 2, "llm.only_occupations": ["nurse"], "llm.genders": []},
    )
    with study, pytest.raises(BackendOutputError) as info:
        study.run("llm_texts", progress=False)
    message = str(info.value)
    assert "\n" not in message and said in message
    assert message.startswith("text generator plugin 'bad' (bad-plugin 0.1")
    with Study.open(tmp_path / "llm") as again:
        assert len(again.table("llm_texts")) == stored


def test_identical_texts_at_a_temperature_are_reported(monkeypatch, tmp_path):
    from corpus_audit.backends import text_generators
    from corpus_audit.backends.text_generators import SamplingSettings, TextRequest

    value = "i, [Completion('the same text', 'stop') for k in range(r.n)]"
    install(
        monkeypatch,
        tmp_path,
        "corpus_audit.text_generators",
        "same",
        TEXT_GENERATOR.format(value=value),
    )
    fresh(monkeypatch, text_generators, "TEXT_GENERATORS")
    generator = text_generators.load_text_generator("same:m", SamplingSettings(temperature=1.0))
    got = text_generators.generate_all(generator, [TextRequest("p", 3, 1), TextRequest("q", 3, 2)])
    assert [len(c) for c in got] == [3, 3]
    (line,) = generator.warnings()
    assert "2 requests returned the same text for every completion at temperature 1.0" in line


GENERATOR = """
import numpy as np
from corpus_audit.backends.generators import GeneratedImage


class Model:
    max_prompt_tokens = 77

    def generate(self, prompts, seeds):
        return {value}

    def count_tokens(self, texts):
        return {tokens}

    def describe(self):
        return {{"backend": "bad"}}

    def close(self):
        pass


def BACKEND(model, settings):
    return Model()
"""


@pytest.mark.parametrize(
    ("value", "tokens", "said"),
    [
        (
            "[GeneratedImage(np.zeros((8, 8), np.uint8), None) for p in prompts]",
            "[3] * len(texts)",
            "as the pixels of image 1 of 2",
        ),
        (
            "[GeneratedImage(np.zeros((8, 8, 3), np.float32), None) for p in prompts]",
            "[3] * len(texts)",
            "(8, 8, 3) (float32)",
        ),
        (
            "[GeneratedImage(np.zeros((8, 8, 3), np.uint8), None)]",
            "[3] * len(texts)",
            "generate returned 1 items for 2 prompts",
        ),
        (
            "[GeneratedImage(np.zeros((8, 8, 3), np.uint8), 'no') for p in prompts]",
            "[3] * len(texts)",
            "nsfw = 'no'",
        ),
        (
            "[GeneratedImage(np.zeros((8, 8, 3), np.uint8), None) for p in prompts]",
            "[-1] * len(texts)",
            "-1 as a token count",
        ),
        ("1 / 0", "[3]", "generate raised ZeroDivisionError: division by zero"),
    ],
)
def test_an_image_generator_plugin_s_wrong_output_is_one_line(
    monkeypatch, tmp_path, value, tokens, said
):
    from corpus_audit.backends import generators
    from corpus_audit.backends.generators import GenerationSettings
    from corpus_audit.stages import generate as generate_stage
    from corpus_audit.stages.generate import Drawer

    code = GENERATOR.format(value=value, tokens=tokens)
    install(monkeypatch, tmp_path, "corpus_audit.generators", "badgen", code)
    registry = fresh(monkeypatch, generators, "GENERATORS")
    monkeypatch.setattr(generate_stage, "GENERATORS", registry)  # imported by name there
    drawer = Drawer("badgen", "m", GenerationSettings())
    with pytest.raises(BackendOutputError) as info:
        drawer((("a nurse", "a chef"), (1, 2)))
    message = str(info.value)
    assert "\n" not in message and said in message
    assert message.startswith("generator plugin 'badgen' (bad-plugin 0.1")


SOURCE = """
from pathlib import Path

from corpus_audit.backends.image_sources.base import PlainSource, SourceOptions, Unit


class Source(PlainSource):
    kind = "badsrc"
    options = SourceOptions

    def units(self, ctx, options):
        return [Unit(Path("unit-1"), lambda: iter({value}))]


BACKEND = Source()
"""


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("[42]", "read yielded 42, not a Record or a Skip"),
        ("[None]", "read yielded None, not a Record or a Skip"),
        ("(1 / 0 for _ in [1])", "read raised ZeroDivisionError: division by zero"),
    ],
)
def test_an_image_source_plugin_s_wrong_output_is_one_line(monkeypatch, tmp_path, value, said):
    from corpus_audit.backends import image_sources
    from corpus_audit.stages import images as images_stage

    install(
        monkeypatch, tmp_path, "corpus_audit.image_sources", "badsrc", SOURCE.format(value=value)
    )
    registry = fresh(monkeypatch, image_sources, "SOURCES")
    monkeypatch.setattr(images_stage, "SOURCES", registry)  # imported by name there
    coco = (
        Path(__file__).resolve().parents[2] / "corpus_audit/demo_data/coco_val2017_captions.parquet"
    )
    with Study.create(tmp_path / "src", coco, settings={"select.sample_unit": "captions"}) as study:
        study.run("select", progress=False)
        study.set({"images.sources": [{"kind": "badsrc", "path": "x"}]})
        with pytest.raises(BackendOutputError) as info:
            study.run("images", progress=False)
        message = str(info.value)
        assert "\n" not in message and said in message
        assert message.startswith("image source plugin 'badsrc' (bad-plugin 0.1")
        assert len(study.table("images")) == 0
