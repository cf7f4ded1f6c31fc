"""The shared helpers: atomic writes, slugs, specs, package versions, devices, image paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_audit.core.devices import resolve_device
from corpus_audit.core.errors import ModelError
from corpus_audit.core.fileio import atomic_path, write_text_atomic
from corpus_audit.core.imagefile import study_image_path
from corpus_audit.core.slugs import slug
from corpus_audit.core.specs import split_spec
from corpus_audit.core.versions import package_versions


def test_atomic_write_replaces_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.html"
    write_text_atomic(target, "old ü")
    assert target.read_bytes() == "old ü".encode()
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "table.csv"
    target.write_text("a,b\n1,2\n")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "a,b\n1,2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_the_temporary_keeps_the_suffix_for_writers_that_add_one(tmp_path: Path) -> None:
    import numpy as np

    target = tmp_path / "ids.npy"
    with atomic_path(target) as tmp:
        assert tmp.suffix == ".npy" and tmp.parent == tmp_path
        np.save(tmp, np.arange(3))  # np.save appends .npy to any other name
    assert np.load(target).tolist() == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["ids.npy"]


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("a photo of a nurse", {}, "a_photo_of_a_nurse"),
        ("__x/y?z__", {}, "x_y_z"),
        ("€€€", {}, "_"),
        ("CompVis--stable diffusion", {"sep": "-", "lower": True}, "compvis--stable-diffusion"),
        ("-My Model-", {"sep": "-", "lower": True, "empty": ""}, "my-model"),
        (".hidden image", {"strip": "._", "empty": "image"}, "hidden_image"),
        ("...", {"strip": "._", "empty": "image"}, "image"),
        ("x" * 100, {"max_len": 80, "empty": "x"}, "x" * 80),
        ("", {"empty": "x"}, "x"),
    ],
)
def test_slug(text: str, options: dict, expected: str) -> None:
    assert slug(text, **options) == expected


def test_model_slugs_stay_the_names_stored_images_live_under() -> None:
    from corpus_audit.backends.generators import model_slug

    assert model_slug("CompVis/stable-diffusion-v1-4") == "compvis--stable-diffusion-v1-4"
    assert model_slug("runwayml/stable-diffusion-v1-5") == "runwayml--stable-diffusion-v1-5"
    # a local path: folder name + 8 hex of sha256 of the spec (computed here by hand)
    import hashlib

    spec = "/nonexistent/My Models/SD 1.4/"
    digest = hashlib.sha256(spec.encode()).hexdigest()[:8]
    assert model_slug(spec) == f"sd-1.4-{digest}"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("random:tiny", ("random", "tiny")),
        ("CompVis/stable-diffusion-v1-4", ("diffusers", "CompVis/stable-diffusion-v1-4")),
        ("C:\\models\\sd", ("diffusers", "C:\\models\\sd")),
        ("random:", ("diffusers", "random:")),
        ("other:tiny", ("diffusers", "other:tiny")),
    ],
)
def test_split_spec(spec: str, expected: tuple[str, str]) -> None:
    assert split_spec(spec, {"random"}, "diffusers") == expected


def test_split_spec_can_report_a_missing_model() -> None:
    assert split_spec("blip:", {"blip"}, "transformers", empty_model=True) == ("blip", "")


def test_package_versions_leave_out_what_is_not_installed() -> None:
    from importlib import metadata

    found = package_versions("duckdb", "no-such-package-corpus-audit")
    assert found == {"duckdb": metadata.version("duckdb")}


def test_device_resolution() -> None:
    torch = pytest.importorskip("torch")
    assert resolve_device("cpu") == "cpu"
    if torch.cuda.is_available():
        assert resolve_device("auto") == "cuda"
        assert resolve_device("cuda:0") == "cuda:0"
        return
    mps = getattr(torch.backends, "mps", None)
    has_mps = mps is not None and mps.is_available()
    assert resolve_device("auto") == ("mps" if has_mps else "cpu")
    for device in ("cuda", "cuda:1"):
        with pytest.raises(ModelError, match=f"engine.device: '{device}'.*no CUDA GPU"):
            resolve_device(device)


def test_every_backend_resolves_devices_the_same_way() -> None:
    from corpus_audit.backends import embeddings, generators
    from corpus_audit.core import devices

    assert embeddings.resolve_device is devices.resolve_device
    assert generators.resolve_device is devices.resolve_device


def test_study_image_paths(tmp_path: Path) -> None:
    assert study_image_path(tmp_path, "images/a.png") == tmp_path / "images" / "a.png"
    assert study_image_path(tmp_path, "/data/b.jpg") == Path("/data/b.jpg")
    assert study_image_path(tmp_path, "~/c.jpg") == Path.home() / "c.jpg"
