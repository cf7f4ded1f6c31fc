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
