"""Registries drive config validation: a backend registered at run time is a valid config
value, an unknown name lists the registered ones, and an image source entry is checked
against its kind's typed options when the config loads (an unknown key names the key)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_audit.backends import classifiers, corpus, embeddings, faces
from corpus_audit.backends.corpus import FileInfo, read_file, resolve_corpus
from corpus_audit.backends.image_sources import SOURCES, parse_source
from corpus_audit.backends.image_sources.hf import HfOptions
from corpus_audit.core.config import CONFIG_NAME, config_from_dict, load_config
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import Registry


def _with(module, attr: str, monkeypatch, name: str, entry) -> Registry:
    """A copy of ``module.attr`` with ``name`` added, in place of the module's for one test."""
    original: Registry = getattr(module, attr)
    copy: Registry = Registry(original.kind)
    for known, value in original.items():
        copy.register(known, value)
    copy.register(name, entry)
    monkeypatch.setattr(module, attr, copy)
    return copy


class ArrowReader:
    """Arrow IPC files (``.arrow``): a real reader a user could register."""

    name = "arrow"
    extensions = (".arrow",)

    def inspect(self, path: Path) -> FileInfo:
        schema = pa.ipc.open_file(path).schema
        return FileInfo(list(schema.names), None, [None], types={f.name: f.type for f in schema})

    def read(self, path: Path, unit, columns, batch_rows: int):
        reader = pa.ipc.open_file(path)
        start = 0
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            yield batch.select([c for c in columns.names() if c in batch.schema.names]), start
            start += batch.num_rows


def test_registered_reader_passes_validation_and_reads(monkeypatch, tmp_path, laion_path):
    with pytest.raises(
        ConfigError, match=r"corpus\.format: 'arrow' is not one of \['auto', 'parquet'"
    ):
        config_from_dict({"corpus": {"format": "arrow"}}, tmp_path)
    _with(corpus, "READERS", monkeypatch, "arrow", ArrowReader())
    config = config_from_dict({"corpus": {"format": "arrow"}}, tmp_path)
    assert config.corpus.format == "arrow"

    table = pq.read_table(laion_path).slice(0, 300)
    with pa.ipc.new_file(tmp_path / "laion.arrow", table.schema) as writer:
        writer.write_table(table, max_chunksize=128)
    (file,) = resolve_corpus([str(tmp_path / "laion.arrow")])  # format=auto: by extension
    assert file.format == "arrow"
    texts = [t for b in read_file(file) for t in b.table.column("text").to_pylist()]
    assert len(texts) == 300
    expected = [t if t else None for t in table.column("TEXT").to_pylist()]
    assert [t or None for t in texts] == expected


@pytest.mark.parametrize(
    ("section", "key", "module", "attr", "entry"),
    [
        ("label", "face_detector", faces, "FACE_DETECTORS", lambda **kw: None),
        ("label", "classifier", classifiers, "CLASSIFIERS", None),
        ("neighbors", "embedder", embeddings, "EMBEDDERS", lambda *a, **kw: None),
    ],
)
def test_backend_names_come_from_the_registries(
    monkeypatch, tmp_path, section, key, module, attr, entry
):
    known = getattr(module, attr).names()
    with pytest.raises(ConfigError) as info:
        config_from_dict({section: {key: "mine"}}, tmp_path)
    message = str(info.value)
    assert f"{section}.{key}: 'mine' is not one of" in message
    assert all(repr(name) in message for name in known)  # the known names are listed
    _with(module, attr, monkeypatch, "mine", entry)
    config = config_from_dict({section: {key: "mine"}}, tmp_path)
    assert getattr(getattr(config, section), key) == "mine"


def test_registry_modules_import_no_model_library():
    code = (
        "import sys; import corpus_audit.core.config, corpus_audit.backends.corpus, corpus_audit.backends.embeddings,"
        " corpus_audit.backends.generators, corpus_audit.backends.paraphrasers, corpus_audit.backends.classifiers,"
        " corpus_audit.backends.faces, corpus_audit.backends.image_sources;"
        " corpus_audit.core.config.config_from_dict({'label': {'classifier': 'clip'},"
        " 'images': {'sources': [{'kind': 'hf', 'path': 'x'}]}}, '.');"
        " print(sorted(m for m in ('torch', 'spacy', 'mediapipe', 'diffusers', 'transformers',"
        " 'datasets', 'open_clip', 'PIL') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- image sources ---------------------------------------------------------------------------
def _write_study(tmp_path: Path, source: str) -> Path:
    (tmp_path / CONFIG_NAME).write_text(f"[images]\nsources = [{source}]\n", encoding="utf-8")
    return tmp_path / CONFIG_NAME


def test_unknown_source_key_is_named_when_the_config_loads(tmp_path):
    path = _write_study(tmp_path, '{kind = "parquet", path = "x.parquet", imag_column = "jpg"}')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}: images.sources[0].imag_column: unknown key")
    assert "image_column" in message and "\n" not in message  # the known keys, one line


def test_unknown_source_key_makes_the_cli_exit_2_with_one_line(tmp_path, capsys):
    from corpus_audit.cli import main

    _write_study(tmp_path, '{kind = "webdataset", path = "shards", image_colum = "jpg"}')
    assert main(["status", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "images.sources[0].image_colum: unknown key for a webdataset source" in err


def test_source_options_are_typed_per_kind(tmp_path):
    _write_study(tmp_path, '{kind = "urls", image_size = "big"}')
    with pytest.raises(ConfigError, match=r"images.sources\[0\].image_size: expected int"):
        load_config(tmp_path)
    _write_study(tmp_path, '{kind = "dir", path = "imgs", split = "train"}')  # an hf option
    with pytest.raises(ConfigError, match=r"sources\[0\].split: unknown key for a dir source"):
        load_config(tmp_path)
    _write_study(tmp_path, '{kind = "webdataset", path = "s", link = "name"}')
    with pytest.raises(ConfigError, match=r"sources\[0\].link: 'name' is not auto"):
        load_config(tmp_path)
    _write_study(tmp_path, '{kind = "hf", path = "ds", split = "train"}')
    config = load_config(tmp_path)
    options = parse_source(0, config.images.sources[0])
    assert isinstance(options, HfOptions) and options.split == "train"
    assert options.image_column == "" and options.link == "auto"  # defaults


def test_source_kinds_are_the_registry(tmp_path):
    assert set(SOURCES.names()) == {"dir", "webdataset", "img2dataset", "parquet", "hf", "urls"}
    with pytest.raises(ConfigError, match=r"sources\[0\].kind: 'ftp' is not one of \['dir'"):
        config_from_dict({"images": {"sources": [{"kind": "ftp", "path": "x"}]}}, tmp_path)
    urls = parse_source(0, {"kind": "urls"})  # the one kind without a path
    assert urls.link == "caption_id" and urls.image_size == 512


def test_cached_embedders_close_and_reload():
    """``close()`` is part of every backend protocol; the embedder cache can be emptied and
    the next load gives a working model again (real SBERT all-MiniLM-L6-v2)."""
    first = embeddings.load_embedder(device="cpu")
    before = first.encode(["a nurse at work"])
    embeddings.close_embedders()
    second = embeddings.load_embedder(device="cpu")
    assert second is not first
    after = second.encode(["a nurse at work"])
    assert after.shape == (1, second.dim) and abs(float((before * after).sum()) - 1.0) < 1e-5


# -- plugins (entry points) ------------------------------------------------------------------------
EXAMPLE_PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "constant_classifier"


def _dist_info(site: Path, dist: str, version: str, group: str, entries: dict[str, str]) -> None:
    """A distribution as pip leaves it in ``site``: METADATA and entry_points.txt."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}", encoding="utf-8")


def _plugin_registry(monkeypatch) -> Registry:
    """A fresh classifier registry (built-ins copied, plugins not yet looked for), in place
    of the module's for one test."""
    fresh: Registry = Registry("classifier", "corpus_audit.classifiers")
    for name in ("agegender", "clip"):
        fresh.register(name, classifiers.CLASSIFIERS.get(name))
    monkeypatch.setattr(classifiers, "CLASSIFIERS", fresh)
    return fresh


def test_plugins_are_found_lazily_and_pass_config_validation(monkeypatch, tmp_path):
    site = tmp_path / "site"
    (site / "my_plugin_mod").mkdir(parents=True)
    (site / "my_plugin_mod" / "__init__.py").write_text(
        "from corpus_audit import ClassifierBackend\n"
        "BACKEND = ClassifierBackend(lambda label, **kw: None, lambda label: 'mine:1')\n",
        encoding="utf-8",
    )
    _dist_info(
        site,
        "my-plugin",
        "2.3.4",
        "corpus_audit.classifiers",
        {"mine": "my_plugin_mod:BACKEND", "clip": "my_plugin_mod:BACKEND"},
    )
    _plugin_registry(monkeypatch)
    with pytest.raises(ConfigError, match="'mine' is not one of"):
        config_from_dict({"label": {"classifier": "mine"}}, tmp_path)  # not installed yet
    monkeypatch.syspath_prepend(str(site))  # installed now (a new process would see it)
    registry = _plugin_registry(monkeypatch)
    assert "my_plugin_mod" not in sys.modules  # names() imports nothing
    assert registry.names() == ("agegender", "clip", "mine")
    assert "my_plugin_mod" not in sys.modules
    config = config_from_dict({"label": {"classifier": "mine"}}, tmp_path)
    assert config.label.classifier == "mine"
    assert classifiers.classifier_id(config.label) == "mine:1"
    # a built-in name wins; the plugin that declares it too is listed as shadowed
    by_name = {p.name: p for p in registry.plugins()}
    assert by_name["clip"].shadowed and not by_name["mine"].shadowed
    assert (by_name["mine"].distribution, by_name["mine"].version) == ("my-plugin", "2.3.4")
    assert registry.get("clip") is classifiers.CLASSIFIERS.get("clip")
    sys.modules.pop("my_plugin_mod", None)


def test_a_plugin_that_fails_to_import_is_one_line(monkeypatch, tmp_path):
    from corpus_audit.core.registry import PluginError

    site = tmp_path / "site"
    _dist_info(site, "broken-plugin", "0.1", "corpus_audit.classifiers", {"broken": "nope_xyz:B"})
    monkeypatch.syspath_prepend(str(site))
    registry = _plugin_registry(monkeypatch)
    config = config_from_dict({"label": {"classifier": "broken"}}, tmp_path)  # a known name
    with pytest.raises(PluginError) as info:
        classifiers.classifier_id(config.label)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("classifier plugin 'broken' (broken-plugin 0.1, entry point group")
    assert "ModuleNotFoundError: No module named 'nope_xyz'" in message
    assert registry.plugin("broken") is not None


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin (examples/constant_classifier) installed by pip into a folder, as
    ``pip install --target`` installs it, plus a distribution whose plugin cannot import."""
    import shutil

    work = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(EXAMPLE_PLUGIN, work / "src")  # pip builds in the copy
    site = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "--target", str(site), str(source)],
        check=True,
        capture_output=True,
    )
    return site


def _run(site: Path, *args: str, script: str | None = None) -> subprocess.CompletedProcess:
    import os

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(site)])}
    cmd = [sys.executable, "-c", script] if script else [sys.executable, "-m", "corpus_audit.cli"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=300)


LABEL_WITH_PLUGIN = """
import json, sys
from pathlib import Path
from corpus_audit import Study

root, corpus, folder = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
with Study.create(root, [corpus], settings={"select.sample_size": 5, "engine.device": "cpu",
                                          "label.face_model": "full_range"}) as study:
    study.run("select", progress=False)
    prompt = study.table("prompts")["prompt_id"].iloc[0]
    lines = []
    for i, path in enumerate(sorted(folder.glob("*.png"))):
        lines.append(json.dumps({"file": path.name, "prompt_id": prompt, "model": "m", "index": i}))
    (folder / "m.jsonl").write_text("\\n".join(lines), encoding="utf-8")
    study.import_images([folder / "m.jsonl"])
    study.set({"label.classifier": "constant"})
    (run,) = study.run("label", progress=False)
    print(json.dumps({"rows_out": run.rows_out}))
"""


def test_example_plugin_labels_a_study_and_is_in_the_provenance(plugin_site, tmp_path, laion_path):
    """The example plugin, installed by pip, named in study.toml: labels stored under its id,
    its distribution version in the label run's provenance, listed by `corpus-audit plugins`."""
    import json

    import duckdb
    from image_fixtures import photo
    from PIL import Image

    folder = tmp_path / "made_elsewhere"
    folder.mkdir()
    for name in ("astronaut", "camera", "grace"):
        Image.fromarray(photo(name)).save(folder / f"{name}.png")
    root = tmp_path / "study"
    done = _run(plugin_site, str(root), str(laion_path), str(folder), script=LABEL_WITH_PLUGIN)
    assert done.returncode == 0, done.stderr[-2000:]
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    labels = con.execute("SELECT classifier, p_female, label FROM labels").fetchall()
    kept = con.execute("SELECT count(*) FROM face_filter WHERE kept").fetchall()[0][0]
    (prov,) = con.execute(
        "SELECT provenance FROM stage_runs WHERE stage = 'label' ORDER BY finished_at DESC LIMIT 1"
    ).fetchall()[0]
    con.close()
    assert kept >= 2  # the three portraits: one face each
    assert labels and len(labels) == kept
    assert set(labels) == {("constant:0.5", 0.5, "ambiguous")}
    prov = json.loads(prov)
    assert prov["plugins"]["corpus_audit.classifiers:constant"] == {
        "entry_point": "corpus_audit_constant:BACKEND",
        "distribution": "corpus-audit-constant-classifier",
        "version": "0.1.0",
    }
    assert prov["versions"]["corpus-audit-constant-classifier"] == "0.1.0"
    assert prov["classifier"]["rule"].startswith("p_female = 0.5")

    listed = _run(plugin_site, "plugins")
    assert listed.returncode == 0, listed.stderr
    assert (
        "corpus_audit.classifiers  constant  corpus-audit-constant-classifier 0.1.0  "
        "corpus_audit_constant:BACKEND  ok"
    ) in listed.stdout


def test_a_broken_plugin_is_one_line_from_the_cli(plugin_site, tmp_path, laion_path):
    import shutil

    site = shutil.copytree(plugin_site, tmp_path / "site")
    _dist_info(site, "broken-plugin", "0.1", "corpus_audit.classifiers", {"broken": "nope_xyz:B"})
    listed = _run(site, "plugins")
    assert listed.returncode == 2
    assert "constant" in listed.stdout and "FAILED" in listed.stdout
    assert listed.stderr.count("\n") == 1 and "classifier plugin 'broken'" in listed.stderr
    import json

    import duckdb
    from image_fixtures import photo
    from PIL import Image

    root, folder = tmp_path / "study", tmp_path / "made_elsewhere"
    folder.mkdir()
    Image.fromarray(photo("astronaut")).save(folder / "a.png")
    assert _run(site, "-q", "init", str(root), "--corpus", str(laion_path)).returncode == 0
    assert _run(site, "-q", "select", str(root)).returncode == 0
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    pid = con.execute("SELECT min(prompt_id) FROM prompts").fetchall()[0][0]
    con.close()
    (folder / "m.jsonl").write_text(json.dumps({"file": "a.png", "prompt_id": pid}), "utf-8")
    imported = _run(site, "-q", "import-images", str(root), str(folder / "m.jsonl"), "--model", "m")
    assert imported.returncode == 0, imported.stderr
    assert _run(site, "config", "set", str(root), "label.classifier=broken").returncode == 0
    failed = _run(site, "-q", "label", str(root))
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1
    assert failed.stderr.startswith("error: classifier plugin 'broken' (broken-plugin 0.1")
    assert "No module named 'nope_xyz'" in failed.stderr
