"""The layouts of ``import-images`` are a registry: ``read_source`` asks them in registration
order (the detection order), and a new layout is one registration."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from corpus_audit.core.errors import ManifestError
from corpus_audit.stages.import_images import LAYOUTS, Entry, Layout, Source, read_source, register


def test_the_built_in_layouts_in_detection_order():
    assert LAYOUTS.names() == ("bafis", "folder", "jsonl", "csv")


def test_each_source_is_read_by_the_layout_that_claims_it(tmp_path: Path):
    (tmp_path / "m.csv").write_text("file,prompt,model\na.png,A photo of a nurse.,x\n")
    (tmp_path / "m.jsonl").write_text('{"file": "a.png", "prompt": "p", "model": "x"}\n')
    (tmp_path / "bafis").mkdir()
    (tmp_path / "bafis" / "metadata.json").write_text('{"0": {"model": "x", "prompt": "p"}}')
    (tmp_path / "per_prompt" / "A nurse").mkdir(parents=True)
    (tmp_path / "per_prompt" / "A nurse" / "0.png").write_bytes(b"\x89PNG")
    assert read_source(tmp_path / "m.csv").layout == "csv"
    assert read_source(tmp_path / "m.jsonl").layout == "jsonl"
    assert read_source(tmp_path / "bafis").layout == "bafis"  # before "folder": BAFIS wins
    assert read_source(tmp_path / "bafis" / "metadata.json").layout == "bafis"
    assert read_source(tmp_path / "per_prompt", "x").layout == "folder"
    (tmp_path / "m.txt").write_text("a.png\n")
    with pytest.raises(ManifestError, match=r"m\.txt: unknown manifest type \(give a \.csv"):
        read_source(tmp_path / "m.txt")
    with pytest.raises(ManifestError, match="no such manifest file or folder"):
        read_source(tmp_path / "missing.csv")


def _read_lines(path: Path, model: str | None) -> Source:
    """A layout of one image path per line, the prompt being the file's stem."""
    data = path.read_bytes()
    entries = [
        Entry(path, f"{path}:{n}", n, path.parent / name, model or "x", prompt=Path(name).stem)
        for n, name in enumerate(data.decode().split(), 1)
    ]
    return Source(path, "lines", hashlib.sha256(data).hexdigest(), entries)


def _claims_lines(path: Path) -> Path | None:
    return path if path.suffix == ".lines" else None


def test_a_new_layout_is_one_registration(tmp_path: Path):
    register(Layout("lines", _claims_lines, _read_lines))
    try:
        (tmp_path / "m.lines").write_text("nurse.png\ndoctor.png\n")
        source = read_source(tmp_path / "m.lines")
        assert source.layout == "lines"
        assert [(e.line, e.prompt, e.file.name) for e in source.entries] == [
            (1, "nurse", "nurse.png"),
            (2, "doctor", "doctor.png"),
        ]
    finally:
        LAYOUTS.unregister("lines")
    with pytest.raises(ManifestError, match="unknown manifest type"):
        read_source(tmp_path / "m.lines")
