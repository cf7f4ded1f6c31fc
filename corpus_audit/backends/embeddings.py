"""Text embedders (one protocol, a registry by name) and the on-disk embedding cache.

An :class:`Embedder` turns texts into L2-normalised float32 vectors (shape ``(n, dim)``, rows
of unit length, so an inner product is a cosine similarity in [-1, 1]). Backends register
under a name (:func:`register_embedder`); ``sbert`` (sentence-transformers) is built in.

SBERT backend choices (measured in ``benchmarks/bench_embed.py``, see ``docs/neighbors.md``):

- ``sentence-transformers/all-MiniLM-L6-v2`` (the default; ``all-MiniLM-L6-v2`` names it too)
  loads from the local Hugging Face cache, the Hub when online, else the ``[offline-models]``
  copy checked against pinned hashes (:mod:`corpus_audit.core.model_sources`); any other
  sentence-transformers id or local path loads as given.
- Texts are sorted by length and cut into batches, so a batch pads to similar lengths.
- ``precision="auto"`` runs bfloat16 on CPUs with native bf16 (AVX512-BF16/AMX) and float16 on
  CUDA, and keeps float32 elsewhere. Reduced precision is accepted only after a self-check:
  a fixed probe set is embedded in float32 and in the reduced precision, and if any probe's
  cosine to its float32 vector is below 0.999 the model stays float32. Dynamic int8
  quantisation was measured and rejected (cosine 0.87-0.93 to float32).

:class:`EmbeddingCache` is content addressed: a vector is stored once under the embedder's
fingerprint (model identity + precision + max_seq_length) and the MD5 of the exact text, in
append-only parts (``part-<uuid>.npy`` float32 rows + ``part-<uuid>.keys.parquet`` with
``key, row``). The keys file is written last, so a killed run leaves no half part. A rerun,
or a second study over the same corpus, finds its texts there and embeds nothing again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from corpus_audit.backends import boundary
from corpus_audit.core import slugs
from corpus_audit.core.config import NeighborsSection, derived_from
from corpus_audit.core.devices import (
    release_memory,
    resolve_device,  # noqa: F401  (re-exported)
)
from corpus_audit.core.errors import BackendOutputError, ConfigError, ModelError
from corpus_audit.core.model_sources import sbert_source
from corpus_audit.core.registry import Registry

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the official id (model_sources)
# Names of the default model (official id first), resolved by model_sources.sbert_source.
BUILTIN_ALIASES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
MIN_PROBE_COSINE = 0.999  # reduced precision is used only when every probe stays this close

# Fixed probe texts for the reduced-precision self-check: caption-like, short to long, with
# markup, digits, punctuation and non-ASCII, as LAION captions have.
_PROBE_TEXTS = (
    "A photo of the face of an engineer",
    "A portrait photo of a nurse",
    "teacher",
    "!!!",
    "Portrait of a smiling female doctor in a white coat with a stethoscope, studio shot",
    "Construction workers on site at dawn — 2019 Stock Photo",
    "<b>CHEF</b> preparing food in a restaurant kitchen &amp; plating a dish",
    "Der Lehrer steht vor der Tafel und erklärt die Aufgabe",
    "img_0031.jpg",
    "Mechanic repairing car engine in auto repair shop. Mechanic checking engine oil level. "
    "Car service, repair, maintenance and people concept - auto mechanic man or smith with "
    "wrench and lamp working at workshop, close up, shallow depth of field, 4k footage",
    "lawyer lawyer lawyer lawyer lawyer lawyer lawyer lawyer lawyer lawyer lawyer lawyer",
    "Vintage 1950s advertisement: the modern housewife and her new vacuum cleaner!",
    "A scientist looks through a microscope in a laboratory",
    "photographer taking pictures at a wedding (c) Jane Doe Photography 2015",
    "12345 67890",
    "CEO of the year award ceremony, New York, NY - March 3, 2018",
)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors.

    ``fingerprint`` names the vectors (model identity and every setting that changes them);
    it keys the cache. ``n_encoded`` counts texts that went through the model (tests assert
    that a rerun adds nothing to it).
    """

    model_id: str
    fingerprint: str
    dim: int
    device: str
    precision: str
    n_encoded: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, rows L2-normalised, in the order given."""
        ...

    def provenance(self) -> dict[str, Any]:
        """Model id, resolved path, versions, device, precision, probe cosine."""
        ...

    def close(self) -> None:
        """Free the model (GPU memory); ``encode`` is not called afterwards."""
        ...


EmbedderFactory = Callable[..., Embedder]
# planner(model, device=, precision=, max_seq_length=) -> the fingerprint, without loading
FingerprintPlanner = Callable[..., str]
# backend name (neighbors.embedder) -> factory; config validation takes its names from here
EMBEDDERS: Registry[EmbedderFactory] = Registry(
    "embedder", "corpus_audit.embedders", expects=("an embedder factory (a callable)", callable)
)
_PLANNERS: dict[str, FingerprintPlanner] = {}
_LOADED: dict[tuple[Any, ...], Embedder] = {}
_LOCK = threading.Lock()


def register_embedder(
    name: str, planner: FingerprintPlanner | None = None
) -> Callable[[EmbedderFactory], EmbedderFactory]:
    """Decorator: register an embedder factory under ``name`` (the config's ``embedder``).

    ``planner`` (optional) tells the fingerprint without loading the model, so a run whose
    vectors are all cached never loads it.
    """

    def deco(factory: EmbedderFactory) -> EmbedderFactory:
        EMBEDDERS.register(name, factory)
        if planner is not None:
            _PLANNERS[name] = planner
        return factory

    return deco


def available_embedders() -> list[str]:
    """Names of the registered embedder backends."""
    return sorted(EMBEDDERS)


@derived_from(NeighborsSection, "engine.device", "precision", "batch_size", "max_seq_length")
class EmbedderSettings:
    """What an embedder's factory is given besides its model (:func:`load_embedder`), derived
    from the ``[neighbors]`` declarations (``engine.device``): ``precision`` auto | fp32 |
    bf16 | fp16, ``batch_size`` texts per batch (0 = per device), ``max_seq_length`` tokens
    (0 = the model's own)."""


def load_embedder(
    model: str = DEFAULT_MODEL,
    *,
    backend: str = "sbert",
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 0,
    max_seq_length: int = 0,
) -> Embedder:
    """The embedder for these settings; loaded once per process and then reused.

    ``batch_size`` 0 picks one per device (64 on CPU, 512 on GPU); ``max_seq_length`` 0 keeps
    the model's own limit (256 tokens for all-MiniLM-L6-v2). Raises :class:`ModelError` for an
    unknown backend or a model that cannot be loaded.
    """
    if backend not in EMBEDDERS:
        raise ModelError(
            f"neighbors.embedder: unknown embedder '{backend}' "
            f"(registered: {', '.join(available_embedders())})"
        )
    try:  # the declarations' checks and messages (neighbors.precision: 'x' is not one of ...)
        EmbedderSettings(
            device=device, precision=precision, batch_size=batch_size, max_seq_length=max_seq_length
        )
    except ConfigError as exc:
        raise ModelError(str(exc)) from None
    device = resolve_device(device)
    key = (backend, model, device, precision, int(batch_size), int(max_seq_length))
    with _LOCK:
        if key not in _LOADED:
            who = boundary.backend_name(EMBEDDERS, backend)
            plugin = boundary.is_plugin(EMBEDDERS, backend)
            factory = EMBEDDERS.get(backend)
            if not callable(factory):
                raise ModelError(f"{who}: names {boundary.shown(factory)}, not an embedder factory")
            built = boundary.call(
                who,
                plugin,
                "loading the model",
                factory,
                model,
                device=device,
                precision=precision,
                batch_size=batch_size,
                max_seq_length=max_seq_length,
            )
            if not callable(getattr(built, "encode", None)):
                raise ModelError(f"{who}: its factory returned {boundary.shown(built)}, no encode")
            _LOADED[key] = CheckedEmbedder(built, who, plugin)
        return _LOADED[key]


class CheckedEmbedder:
    """An embedder whose vectors are checked at the boundary before any caller stores or
    caches them (:func:`corpus_audit.backends.boundary.check_vectors`: ``(n, dim)``, finite,
    no zero row; a row off unit length is normalised here and counted in
    ``renormalised``, which :meth:`provenance` reports). A plugin's exception is one line
    naming it. Everything else is the wrapped embedder's (``fingerprint``, ``dim``...)."""

    def __init__(self, inner: Any, who: str, plugin: bool) -> None:
        self.inner, self.who, self.plugin = inner, who, plugin
        self.renormalised = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("inner", "who", "plugin"):
            raise AttributeError(name)  # not set yet (a copy being made)
        return getattr(self.inner, name)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped embedder's vectors of ``texts``, checked: ``(len(texts), dim)``
        float32 unit rows."""
        texts = list(texts)
        got = boundary.call(self.who, self.plugin, "encode", self.inner.encode, texts)
        dim = getattr(self.inner, "dim", None)
        vectors, fixed = boundary.check_vectors(
            got, len(texts), self.who, dim if isinstance(dim, int) and dim > 0 else None
        )
        if fixed:
            if not self.renormalised:
                logging.getLogger("corpus_audit").warning(
                    "%s: encode returned vectors that are not of unit length; normalised",
                    self.who,
                )
            self.renormalised += fixed
        return vectors

    def provenance(self) -> dict[str, Any]:
        out = dict(boundary.call(self.who, self.plugin, "provenance", self.inner.provenance))
        if self.renormalised:
            out["renormalised_vectors"] = self.renormalised
        return out

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            boundary.call(self.who, self.plugin, "close", close)


def plan_fingerprint(
    model: str,
    *,
    backend: str = "sbert",
    device: str = "auto",
    precision: str = "auto",
    max_seq_length: int = 0,
) -> str | None:
    """The fingerprint the embedder will have, or None when its backend cannot tell."""
    planner = _PLANNERS.get(backend)
    if planner is None:
        return None
    return planner(model, device=device, precision=precision, max_seq_length=max_seq_length)


def text_key(text: str) -> str:
    """The cache key of a text: MD5 hex of its UTF-8 bytes (DuckDB's ``md5(text)`` agrees)."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def slug(text: str) -> str:
    """A file-name-safe form of ``text`` (letters, digits, ``.-_``)."""
    return slugs.slug(text, max_len=80, empty="x")


# -- the SBERT backend ---------------------------------------------------------------------


def native_precision(device: str) -> str:
    """The reduced precision ``device`` runs natively: fp16 on CUDA, bf16 on CPUs with
    AVX512-BF16/AMX (oneDNN), else fp32."""
    import torch

    if device.startswith("cuda"):
        return "fp16"
    if device == "cpu":
        try:
            if torch.ops.mkldnn._is_mkldnn_bf16_supported():
                return "bf16"
        except (AttributeError, RuntimeError):
            pass
    return "fp32"


def fingerprint_for(model: str, identity: str, precision: str, max_seq_length: int) -> str:
    """The name of the vectors: readable model name + precision + hash of every setting.

    ``max_seq_length`` is the configured value (0 = the model's own limit).
    """
    blob = json.dumps(
        {
            "identity": identity,
            "precision": precision,
            "max_seq_length": int(max_seq_length),
            "normalize": True,
        },
        sort_keys=True,
    )
    name = slug(Path(model).name if Path(model).exists() else model)
    return f"{name}-{precision}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def planned_fingerprint(
    model: str, *, device: str = "auto", precision: str = "auto", max_seq_length: int = 0
) -> str:
    """The fingerprint :class:`SbertEmbedder` will have, without loading the model.

    It differs from the loaded one only when ``precision="auto"`` falls back to fp32 after a
    failed probe (then the stage loads the model and uses the loaded fingerprint).
    """
    _, identity = resolve_sbert_model(model)
    dev = resolve_device(device)
    chosen = native_precision(dev) if precision == "auto" else precision
    return fingerprint_for(model, identity, chosen, max_seq_length)


def resolve_sbert_model(model: str) -> tuple[str, str]:
    """``(what to load, identity)`` for a model name.

    The built-in aliases resolve through :func:`corpus_audit.core.model_sources.sbert_source`
    (the local HF cache, the Hub when online, the pinned ``[offline-models]`` copy); an existing path loads from disk
    (identity = resolved path + a hash of its config files and weight sizes); anything else
    is handed to sentence-transformers as a hub id.
    """
    official = sbert_source(model)  # the default: HF cache, the Hub, or the pinned copy
    if official is not None:
        return official.load, official.identity
    p = Path(model).expanduser()
    if p.exists():
        if not p.is_dir():
            raise ModelError(f"{model}: not a sentence-transformers model directory")
        h = hashlib.sha256()
        for f in sorted(p.rglob("*")):
            if f.is_file():
                h.update(str(f.relative_to(p)).encode())
                if f.suffix in {".json", ".txt"} and f.stat().st_size < 5_000_000:
                    h.update(f.read_bytes())
                else:
                    h.update(str(f.stat().st_size).encode())
        return str(p.resolve()), f"{p.resolve()}@{h.hexdigest()[:16]}"
    return model, model


@dataclass
class _Probe:
    min_cosine: float | None = None


class SbertEmbedder:
    """sentence-transformers model with length-sorted batches and checked reduced precision."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "auto",
        precision: str = "auto",
        batch_size: int = 0,
        max_seq_length: int = 0,
    ) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        self.model_id = model
        self.path, self.identity = resolve_sbert_model(model)
        official = sbert_source(model)
        self.source = official.source if official is not None else "as configured"
        self.device = resolve_device(device)
        try:
            st = SentenceTransformer(self.path, device=self.device)
        except Exception as exc:  # OSError, ValueError, HF hub errors: all mean "cannot load"
            offline = os.environ.get("HF_HUB_OFFLINE") == "1"
            hint = (
                " (the hub is offline here: give a local model directory)"
                if offline and not Path(model).exists()
                else ""
            )
            raise ModelError(
                f"{model}: cannot load the sentence-transformers model: {exc}{hint}"
            ) from None
        self.requested_max_len = int(max_seq_length)
        if max_seq_length:
            st.max_seq_length = int(max_seq_length)
        st.to(torch.float32)  # checkpoints stored in half precision start from float32 too
        st.eval()
        self._st = st
        self._torch = torch
        self.dim = int(st.get_embedding_dimension())
        self.max_seq_length = int(st.max_seq_length or 0)
        on_gpu = self.device.startswith("cuda")
        self.batch_size = int(batch_size) or (512 if on_gpu else 64)
        self.n_encoded = 0
        self.probe = _Probe()
        self.precision = self._choose_precision(precision)
        self.fingerprint = self._fingerprint()

    # -- precision -------------------------------------------------------------------------
    def _choose_precision(self, precision: str) -> str:
        wanted = native_precision(self.device) if precision == "auto" else precision
        if wanted == "fp32":
            return "fp32"
        dtype = {"bf16": self._torch.bfloat16, "fp16": self._torch.float16}[wanted]
        reference = self._run(list(_PROBE_TEXTS))
        self._st.to(dtype)
        reduced = self._run(list(_PROBE_TEXTS))
        cosine = float((reference * reduced).sum(axis=1).min())
        self.probe.min_cosine = cosine
        if cosine >= MIN_PROBE_COSINE or precision != "auto":
            return wanted
        # Too far from float32: reload in float32 (casting back would keep the rounding).
        import torch
        from sentence_transformers import SentenceTransformer

        max_len = self._st.max_seq_length
        self._st = SentenceTransformer(self.path, device=self.device).to(torch.float32).eval()
        self._st.max_seq_length = max_len
        return "fp32"

    def _fingerprint(self) -> str:
        return fingerprint_for(self.model_id, self.identity, self.precision, self.requested_max_len)

    # -- encoding --------------------------------------------------------------------------
    def _run(self, texts: Sequence[str]) -> np.ndarray:
        """Encode without counting (length-sorted batches)."""
        torch = self._torch
        from sentence_transformers.util import batch_to_device

        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        order = np.argsort(
            np.fromiter((len(t) for t in texts), dtype=np.int64, count=n), kind="stable"
        )
        with torch.inference_mode():
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                features = self._st.preprocess([texts[i] for i in idx])
                features = batch_to_device(features, self.device)
                emb = self._st(features)["sentence_embedding"].float()
                emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                out[idx] = emb.cpu().numpy()
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows, in the order given."""
        out = self._run(list(texts))
        self.n_encoded += len(texts)
        return out

    def provenance(self) -> dict[str, Any]:
        return {
            "embedder": "sbert",
            "model": self.model_id,
            "model_path": self.path,
            "identity": self.identity,
            "source": self.source,  # which source served the model (model_sources)
            "fingerprint": self.fingerprint,
            "dim": self.dim,
            "device": self.device,
            "precision": self.precision,
            "precision_probe_min_cosine": self.probe.min_cosine,
            "max_seq_length": self.max_seq_length,
            "batch_size": self.batch_size,
            "sentence_transformers": metadata.version("sentence-transformers"),
            "torch": metadata.version("torch"),
        }

    def close(self) -> None:
        self._st = None
        release_memory()


def close_embedders() -> None:
    """Close every embedder :func:`load_embedder` keeps for reuse and forget them."""
    with _LOCK:
        loaded = list(_LOADED.values())
        _LOADED.clear()
    for embedder in loaded:
        embedder.close()


register_embedder("sbert", planner=planned_fingerprint)(SbertEmbedder)


# -- the cache -----------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$CORPUS_AUDIT_CACHE/embeddings``, else ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    base = os.environ.get("CORPUS_AUDIT_CACHE")
    if base:
        return Path(base).expanduser() / "embeddings"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return root / "corpus_audit" / "embeddings"


class EmbeddingCache:
    """Content-addressed vectors of one embedder fingerprint under ``root/<fingerprint>/``.

    Parts are append-only and never rewritten. Two processes may add parts at once (each
    part has its own uuid); a text embedded twice that way has two rows with equal vectors,
    and readers take either.
    """

    KEYS_SUFFIX = ".keys.parquet"

    def __init__(self, root: Path | str, fingerprint: str, dim: int | None = None) -> None:
        self.root = Path(root).expanduser()
        self.fingerprint = fingerprint
        self.dim = int(dim) if dim else None  # learnt from the first part when not given
        self.dir = self.root / fingerprint
        self._mmaps: dict[str, np.ndarray] = {}

    def ensure(self, meta: dict[str, Any] | None = None) -> None:
        """Create the directory and its ``meta.json`` (model provenance) if missing."""
        self.dir.mkdir(parents=True, exist_ok=True)
        meta_path = self.dir / "meta.json"
        if not meta_path.exists():
            tmp = meta_path.with_name(f"meta.{uuid.uuid4().hex}.tmp")
            tmp.write_text(
                json.dumps(
                    {"fingerprint": self.fingerprint, "dim": self.dim, **(meta or {})},
                    indent=1,
                    default=str,
                ),
                encoding="utf-8",
            )
            tmp.replace(meta_path)

    def key_files(self) -> list[Path]:
        """Committed parts' key files, sorted by name."""
        if not self.dir.is_dir():
            return []
        return sorted(self.dir.glob("part-*" + self.KEYS_SUFFIX))

    def keys_glob(self) -> str:
        """Glob of the key files, for DuckDB ``read_parquet``."""
        return str(self.dir / ("part-*" + self.KEYS_SUFFIX))

    @staticmethod
    def vectors_path(keys_file: Path | str) -> Path:
        """The ``.npy`` that holds the rows of a key file."""
        p = Path(keys_file)
        return p.with_name(p.name[: -len(EmbeddingCache.KEYS_SUFFIX)] + ".npy")

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> Path:
        """Write one part (vectors first, keys last) and return its key file path."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.dim is None and vectors.ndim == 2:
            self.dim = int(vectors.shape[1])
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(
                f"vectors shape {vectors.shape} does not match {len(keys)} x {self.dim}"
            )
        # the last guard of a cache other studies reuse: no NaN, infinity or zero row enters
        norms = np.linalg.norm(vectors.astype(np.float64), axis=1) if len(vectors) else vectors
        if len(vectors) and not (np.isfinite(norms).all() and (norms >= boundary.ZERO_NORM).all()):
            raise BackendOutputError(
                f"{self.dir}: refused to cache vectors with NaN, infinite or zero rows "
                "(the embedder's output is not usable); nothing was cached"
            )
        self.ensure()
        name = f"part-{uuid.uuid4().hex}"
        npy = self.dir / f"{name}.npy"
        tmp = self.dir / f"{name}.npy.tmp"
        with open(tmp, "wb") as fh:
            np.save(fh, vectors)
        tmp.replace(npy)
        table = pa.table(
            {
                "key": pa.array(list(keys), pa.string()),
                "row": pa.array(np.arange(len(keys), dtype=np.int32)),
            }
        )
        keys_path = self.dir / f"{name}{self.KEYS_SUFFIX}"
        ktmp = self.dir / f"{name}.keys.tmp"
        pq.write_table(table, ktmp)
        ktmp.replace(keys_path)
        return keys_path

    def _mmap(self, npy: str) -> np.ndarray:
        arr = self._mmaps.get(npy)
        if arr is None:
            arr = np.load(npy, mmap_mode="r")
            if self.dim is None and arr.ndim == 2:
                self.dim = int(arr.shape[1])
            if arr.ndim != 2 or arr.shape[1] != self.dim:
                raise ValueError(
                    f"{npy}: expected rows of {self.dim} floats, found shape {arr.shape}"
                )
            self._mmaps[npy] = arr
        return arr

    def gather(self, files: Sequence[str], rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """Vectors at ``(files[i], rows[i])`` (``.npy`` paths), as one ``(n, dim)`` array."""
        files_arr = np.asarray(files, dtype=object)
        rows_arr = np.asarray(rows, dtype=np.int64)
        if len(rows_arr) and self.dim is None:
            self._mmap(str(files_arr[0]))
        out = np.empty((len(rows_arr), self.dim or 0), dtype=np.float32)
        if len(rows_arr) == 0:
            return out
        for f in dict.fromkeys(files_arr.tolist()):
            sel = np.flatnonzero(files_arr == f)
            arr = self._mmap(f)
            r = rows_arr[sel]
            order = np.argsort(r, kind="stable")  # read each part front to back
            out[sel[order]] = arr[r[order]]
        return out

    def lookup(self, keys: Iterable[str]) -> dict[str, tuple[str, int]]:
        """``key -> (npy path, row)`` for the keys present (small sets; the stage uses SQL)."""
        import duckdb

        wanted = list(dict.fromkeys(keys))
        if not wanted or not self.key_files():
            return {}
        import pyarrow as pa

        con = duckdb.connect()
        try:
            con.register("w", pa.table({"key": pa.array(wanted, pa.string())}))
            rows = con.execute(
                "SELECT p.key, any_value(p.filename ORDER BY p.filename), any_value(p.row ORDER BY p.filename) "
                "FROM read_parquet(?, filename = true) p JOIN w USING (key) GROUP BY p.key",
                [self.keys_glob()],
            ).fetchall()
        finally:
            con.close()
        return {k: (str(self.vectors_path(f)), int(r)) for k, f, r in rows}


def embed_with_cache(
    texts: Sequence[str],
    cache: EmbeddingCache,
    embedder_factory: Callable[[], Embedder],
) -> tuple[np.ndarray, int]:
    """Vectors of ``texts`` (a small list, e.g. prompts) from the cache, embedding the missing.

    Returns ``(vectors, n_embedded)``; the embedder is only created when something is missing.
    """
    keys = [text_key(t) for t in texts]
    found = cache.lookup(keys)
    missing = [k for k in dict.fromkeys(keys) if k not in found]
    if missing:
        by_key = dict(zip(keys, texts, strict=True))
        embedder = embedder_factory()
        vecs = embedder.encode([by_key[k] for k in missing])
        cache.add(missing, vecs)
        found = cache.lookup(keys)
    files = [found[k][0] for k in keys]
    rows = [found[k][1] for k in keys]
    return cache.gather(files, rows), len(missing)
