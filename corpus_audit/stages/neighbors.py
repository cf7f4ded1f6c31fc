"""The ``neighbors`` stage: SBERT embeddings + FAISS nearest-neighbour captions per prompt.

METHODS 1.5. For each occupation ``o`` and each of its prompts ``P``:

- ``nn``: the ``k`` (``neighbors.k``, default 500) captions of ``o`` (all its captions in
  ``mentions``, not only the keyword sample) with the highest cosine similarity to ``P``,
  ranked 1..k with the cosine as ``score`` (in [-1, 1]);
- ``nn_no_indicators``: the same among ``o``'s captions whose indicator label is ``none``
  (a search of its own, not a split of ``nn``).

With ``select.sample_unit = "labelled_images"`` (default) the paper's NN subsets are ``k``
*labelled* training images per prompt, like the keyword subsets: the stage then ranks
``ceil(k x select.overdraw)`` candidates, and the analysis cuts each list in rank order at the
``k``-th caption whose training image got a confident label (:mod:`corpus_audit.tables.subsets`).
With ``"captions"`` it keeps the top ``k``.

With fewer captions than that an occupation gets all of them (``short_of_k`` in
``similarity_diagnostics`` when fewer than ``k``, and a run message names it). Ties in score
are broken by caption_id (smaller first), so the selection is reproducible.

``similarity_diagnostics`` holds, per strategy (keyword, no_indicators, nn, nn_no_indicators)
x occupation x prompt, the mean cosine similarity between the first ``N`` captions of the
subset's ranked list (``select.sample_size`` for keyword / no_indicators, ``k`` for nn: the
subset itself when every image is usable) and the prompt, and their number; ``run.summary``
averages it per strategy (the paper, LAION: 0.385 keyword vs 0.704 NN).

Work, and what makes it resumable:

1. Every distinct caption/prompt text is looked up in the content-addressed embedding cache
   (:class:`corpus_audit.backends.embeddings.EmbeddingCache`); the missing ones are embedded in chunks
   sorted by length and written to the cache as they finish (a killed run loses at most one
   chunk; memory holds one chunk, not the corpus). The model is not even loaded when nothing
   is missing. The chunks are the units of the study's engine (:func:`embed_chunks`): the
   engine's model workers (``ModelSpec(ChunkEmbedder, ...)``: one embedder in this process on
   the local engine, embedder actors with ``engine.gpus_per_worker`` GPUs each, CPU actors
   at 0, on Ray) embed them and the driver writes every part of the cache, in chunk order,
   from the vectors the workers return.
2. Per occupation: its vectors are gathered from the memory-mapped cache parts, a FAISS index
   is built (or reloaded, memory-mapped, from ``<index_dir>/<model>/``) and searched; samples,
   diagnostics and a progress row are written in one transaction. An occupation whose inputs
   signature (captions, labels, samples, prompts, settings, embedder) is unchanged is skipped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_audit.backends.embeddings import (
    EmbeddingCache,
    default_cache_dir,
    load_embedder,
    plan_fingerprint,
    resolve_device,
    slug,
)
from corpus_audit.backends.engines import model_resources, stage_engine
from corpus_audit.backends.engines.base import Engine, Resources, progress_bar, track
from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.models import ModelSpec, model_session
from corpus_audit.backends.index import (
    IndexSpec,
    build_index,
    effective_kind,
    faiss_gpu_available,
    index_kind,
    load_index,
    numpy_exact_search,
    recall_at_k,
    save_index,
    search,
    torch_exact_search,
)
from corpus_audit.core.errors import ModelError, printable
from corpus_audit.core.fileio import atomic_path, refuse_links
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.stage_state import StageProgress
from corpus_audit.core.store import StageRun, Study, dicts

STRATEGIES = ("keyword", "no_indicators", "nn", "nn_no_indicators")
PAPER_LAION = {"keyword": 0.385, "nn": 0.704}  # METHODS 1.5 diagnostics
TIE_MARGIN = 32  # extra candidates fetched so ties at the k-th score break by caption_id


@stage_body("neighbors")
def neighbors(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Embed captions and prompts, select the nn / nn_no_indicators samples, diagnose them."""
    cfg = study.config.neighbors
    engine = stage_engine(study.config.engine, run)  # closed with the run
    con = study.con
    cache_root = study.config.resolve(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    device = resolve_device(study.config.engine.device)
    state = _EmbedState(study, run, cache_root, device, engine)

    run.rows_in = int(con.execute("SELECT count(DISTINCT caption_id) FROM mentions").fetchone()[0])
    run.provenance["k"] = cfg.k
    if study.count("prompts") == 0:
        with study.transaction():
            con.execute("DELETE FROM samples WHERE strategy IN ('nn', 'nn_no_indicators')")
            con.execute("DELETE FROM similarity_diagnostics")
            con.execute("DELETE FROM neighbors_progress")
        run.messages.append(
            "no prompts in this study (the prompts table is empty; check lexicon.prompts "
            "and rerun `select`): no nn samples were selected"
        )
        run.skipped = True
    else:
        embedded = _embed_missing(study, state, run, engine, progress=progress)
        _process_occupations(study, state, run, embedded=embedded, progress=progress)
    return run


# -- inputs ----------------------------------------------------------------------------------


def progress(study: Study) -> StageProgress | None:
    """Occupations whose nn samples match their current inputs, of all occupations (for
    ``status`` on a partial run); None before any occupation is finished."""
    rows = study.con.execute(
        "SELECT model_id FROM neighbors_progress ORDER BY finished_at DESC LIMIT 1"
    ).fetchall()
    if not rows:
        return None
    model = rows[0][0]
    study.sql("neighbors/50_inputs", model=model, config=_config_signature(study, model))
    ((done, total),) = study.sql("neighbors/55_progress").fetchall()
    return StageProgress(int(done), int(total), "occupations")


class _EmbedState:
    """The embedder's fingerprint (planned, or probed on a worker of the run's engine) and cache.

    ``device`` is where the driver searches; the embedder's device (and so its planned
    fingerprint) is the workers' (:meth:`Engine.worker_device`: on the local engine the
    driver's own; on Ray ``engine.device`` when it names one, else ``cuda`` for GPU actors,
    ``engine.gpus_per_worker`` > 0, and ``cpu``). Each worker has 1 CPU and
    ``engine.gpus_per_worker`` GPUs; ``engine.workers.neighbors`` of them (0 = the engine's
    default).
    """

    def __init__(
        self, study: Study, run: StageRun, cache_root: Path, device: str, engine: Engine
    ) -> None:
        cfg = study.config.neighbors
        eng = study.config.engine
        self.study = study
        self.run = run
        self.cache_root = cache_root
        self.device = device
        self.resources = model_resources(eng)
        self.workers = eng.workers_for("neighbors")
        embed_device = engine.worker_device(eng.device, self.resources)
        # the embedder is probed on a worker (its fingerprint, its provenance) when the workers
        # embed on the driver's own device (on the local engine the in-process workers then
        # share that load: one per process), so that a precision fallback re-keys the cache
        # before any chunk goes out
        self.embeds_here = embed_device == device
        self.worker_provenance: dict[str, Any] | None = None  # the workers' embedder
        self.kwargs = {
            "backend": cfg.embedder,
            "device": embed_device,
            "precision": cfg.precision,
            "max_seq_length": cfg.max_seq_length,
        }
        self.probed: dict[str, Any] | None = None  # the probed embedder's provenance
        self.fingerprint: str | None = plan_fingerprint(cfg.model, **self.kwargs)
        if self.fingerprint is None:
            self.probe()
        self.cache = EmbeddingCache(cache_root, self.fingerprint)

    def settings(self, fingerprint: str | None) -> EmbedderSettings:
        """The workers' embedder settings, checked against ``fingerprint`` (None: not)."""
        cfg = self.study.config.neighbors
        return EmbedderSettings(
            model=cfg.model,
            backend=self.kwargs["backend"],
            device=self.kwargs["device"],
            precision=self.kwargs["precision"],
            batch_size=cfg.batch_size,
            max_seq_length=self.kwargs["max_seq_length"],
            fingerprint=fingerprint,
        )

    def probe(self) -> None:
        """Load the workers' embedder on a worker of the run's engine, once, and take its
        fingerprint and provenance: a precision that fell back (``auto`` to fp32 after a
        failed probe) means other vectors, so the cache is keyed anew."""
        if self.probed is not None:
            return
        spec = probe_spec(self.settings(None))
        with model_session(self.study.config.engine, "neighbors", spec, run=self.run) as probe:
            fingerprint, self.probed = probe(None)
        if self.fingerprint not in (None, fingerprint):
            self.cache = EmbeddingCache(self.cache_root, fingerprint)
        self.fingerprint = fingerprint

    def spec(self) -> ModelSpec[ChunkEmbedder]:
        """The workers' embedder, with the fingerprint it must have."""
        return embedder_spec(self.settings(self.fingerprint))


# -- embedding as engine work ------------------------------------------------------------------


@dataclass(frozen=True)
class EmbedderSettings:
    """Everything an embedding worker depends on, as plain values (picklable): the
    ``[neighbors]`` model settings, the device the worker embeds on and the fingerprint the
    driver's cache is keyed by (None: not checked)."""

    model: str
    backend: str = "sbert"
    device: str = "cpu"
    precision: str = "auto"
    batch_size: int = 0
    max_seq_length: int = 0
    fingerprint: str | None = None


@dataclass
class EmbeddedChunk:
    """One chunk embedded: ``vectors`` (texts x dim, float32 unit rows, in the chunk's
    order) and the worker's embedder provenance (for the cache's ``meta.json``)."""

    vectors: np.ndarray
    provenance: dict[str, Any]


class ChunkEmbedder:
    """The model of an embedding worker: an embedder loaded once per worker
    (:func:`load_embedder` keeps one per process, so on the local engine it is the driver's
    own, and it is never closed here). Raises :class:`ModelError` when its fingerprint is
    not the driver's: a precision fallback on one device would mix vectors in one cache."""

    def __init__(self, settings: EmbedderSettings) -> None:
        self.embedder = _load(settings)
        got = self.embedder.fingerprint
        if settings.fingerprint is not None and got != settings.fingerprint:
            raise ModelError(
                f"neighbors: the worker's embedder has fingerprint {got}, the driver planned "
                f"{settings.fingerprint} (a precision fallback on the worker's device?); set "
                "neighbors.precision explicitly"
            )
        self.provenance = self.embedder.provenance()

    def __call__(self, texts: list[str]) -> EmbeddedChunk:
        """The unit vectors of one chunk of texts, in its order."""
        return EmbeddedChunk(self.embedder.encode(texts), self.provenance)


def embedder_spec(settings: EmbedderSettings) -> ModelSpec[ChunkEmbedder]:
    """The engine's model worker of ``settings``: a :class:`ChunkEmbedder` per worker."""
    return ModelSpec(ChunkEmbedder, (settings,))


def _load(settings: EmbedderSettings) -> Any:
    """The embedder of ``settings`` (:func:`load_embedder`: one per process, shared)."""
    return load_embedder(
        settings.model,
        backend=settings.backend,
        device=settings.device,
        precision=settings.precision,
        batch_size=settings.batch_size,
        max_seq_length=settings.max_seq_length,
    )


def _facts(embedder: Any, _: Any) -> tuple[str, dict[str, Any]]:
    """The probe's one answer: the embedder's fingerprint and provenance."""
    return embedder.fingerprint, embedder.provenance()


def probe_spec(settings: EmbedderSettings) -> ModelSpec[Any]:
    """A worker that loads the embedder of ``settings`` and says its fingerprint and
    provenance (shared: ``load_embedder`` keeps it for the chunk workers of this process)."""
    return ModelSpec(_load, (settings,), serve=_facts, shared=True)


def embed_chunks(
    engine: Engine,
    spec: Any,
    chunks: Iterable[tuple[int, list[str]]],
    *,
    gpus_per_worker: float = 0.0,
    workers: int = 0,
    progress: bool = False,
) -> Iterator[tuple[int, EmbeddedChunk]]:
    """Embed ``(chunk number, texts)`` units with ``spec``'s workers (:func:`embedder_spec`;
    one CPU and ``gpus_per_worker`` GPUs each; ``workers`` of them, 0 = the engine's
    default), in chunk order."""
    yield from engine.map_actors(
        spec,
        chunks,
        resources=Resources(num_cpus=1, num_gpus=gpus_per_worker),
        workers=workers,
        progress=EngineProgress("neighbors: embed", unit="chunk", enabled=progress),
    )


def _find_cached(study: Study, cache: EmbeddingCache) -> None:
    """``_nb_found``: the cache's rows of the texts to embed. The key files are read here
    with pyarrow, one at a time, and handed to DuckDB as arrow tables: the study connection
    has no file access of its own (``store.LOCKED_SETTINGS``)."""
    con = study.con
    con.execute(
        'CREATE OR REPLACE TEMP TABLE _nb_key_rows (key VARCHAR, filename VARCHAR, "row" INTEGER)'
    )
    for path in cache.key_files():
        part = pq.read_table(path, columns=["key", "row"])
        con.register("_nb_key_part", part)
        try:
            con.execute(
                'INSERT INTO _nb_key_rows SELECT key, ?, "row" FROM _nb_key_part '
                "WHERE key IN (SELECT key FROM _nb_texts)",
                [str(path)],
            )
        finally:
            con.unregister("_nb_key_part")
    study.sql("neighbors/20_found")


def _embed_missing(
    study: Study, state: _EmbedState, run: StageRun, engine: Engine, *, progress: bool
) -> int:
    """Embed every text not in the cache, chunk by chunk; map captions/prompts to vectors."""
    con = study.con
    study.sql("neighbors/10_texts")
    _find_cached(study, state.cache)
    study.sql("neighbors/30_missing")
    n_missing = int(con.execute("SELECT count(*) FROM _nb_missing").fetchone()[0])
    embedded = 0
    if n_missing:
        before = state.fingerprint
        if state.embeds_here:
            state.probe()  # the workers' own device: a fallback re-keys the cache first
        if state.fingerprint != before:  # fell back to another precision: look up again
            _find_cached(study, state.cache)
            study.sql("neighbors/30_missing")
            n_missing = int(con.execute("SELECT count(*) FROM _nb_missing").fetchone()[0])
        embedded = _embed_chunks(study, state, run, engine, n_missing, progress=progress)
        _find_cached(study, state.cache)
    n_unfound = int(
        con.execute(
            "SELECT count(*) FROM _nb_texts WHERE key NOT IN (SELECT key FROM _nb_found)"
        ).fetchone()[0]
    )
    if n_unfound:  # cannot happen unless the cache directory is changed under us
        raise RuntimeError(
            f"{state.cache.dir}: {n_unfound} embedded texts are missing from the cache"
        )
    with study.transaction():
        study.sql("neighbors/40_caption_map", model=state.fingerprint)
        study.sql("neighbors/41_prompt_map", model=state.fingerprint)
        parts = _parts_in_use(study, state)
        study.sql("neighbors/42_files", model=state.fingerprint, parts=parts)
    run.provenance["embedded"] = embedded
    run.provenance["texts"] = int(con.execute("SELECT count(*) FROM _nb_texts").fetchone()[0])
    run.provenance["cache_dir"] = str(state.cache.dir)
    run.outputs["embedding_cache"] = str(state.cache.dir)
    return embedded


def _embed_chunks(
    study: Study,
    state: _EmbedState,
    run: StageRun,
    engine: Engine,
    n_missing: int,
    *,
    progress: bool,
) -> int:
    """The chunks of ``_nb_missing`` embedded on ``engine``; each chunk's vectors written to
    the cache here, in chunk order, as one part. Returns the texts embedded."""
    con = study.con
    chunk = study.config.neighbors.chunk_size
    in_flight: dict[int, list[str]] = {}  # the keys of the chunks out with the workers

    def units() -> Iterator[tuple[int, list[str]]]:
        for start in range(0, n_missing, chunk):
            rows = con.execute(
                "SELECT key, text FROM _nb_missing WHERE rn > ? AND rn <= ? ORDER BY rn",
                [start, start + chunk],
            ).fetchall()
            in_flight[start] = [r[0] for r in rows]
            yield start, [r[1] for r in rows]

    embedded = 0
    bar = progress_bar(EngineProgress("neighbors: embed", "text", n_missing, progress))
    run.provenance["engine"] = engine.describe()
    chunks = embed_chunks(
        engine,
        state.spec(),
        units(),
        gpus_per_worker=state.resources.num_gpus,
        workers=state.workers,
    )
    try:
        for start, result in chunks:
            keys = in_flight.pop(start)
            if state.worker_provenance is None:
                state.worker_provenance = result.provenance
                state.cache.ensure(result.provenance)
            state.cache.add(keys, result.vectors)
            embedded += len(keys)
            bar.update(len(keys))
    finally:
        chunks.close()  # the workers stop however the loop ends
        bar.close()
    return embedded


def _parts_in_use(study: Study, state: _EmbedState) -> list[dict[str, Any]]:
    paths = [r[0] for r in study.sql("neighbors/43_parts", model=state.fingerprint).fetchall()]
    parts = []
    for p in paths:
        arr = np.load(p, mmap_mode="r")
        parts.append(
            {
                "path": p,
                "ids_path": p[: -len(".npy")] + EmbeddingCache.KEYS_SUFFIX,
                "n_rows": int(arr.shape[0]),
                "dim": int(arr.shape[1]),
            }
        )
    return parts


# -- per occupation ------------------------------------------------------------------------


def _config_signature(study: Study, fingerprint: str) -> str:
    cfg = study.config.neighbors
    settings = {
        "model_id": fingerprint,
        "k": cfg.k,
        "index": cfg.index,
        "nlist": cfg.nlist,
        "nprobe": cfg.nprobe,
        "hnsw_m": cfg.hnsw_m,
        "ef_search": cfg.ef_search,
        "sample_size": study.config.select.sample_size,
        "candidates": study.config.select.candidates(cfg.k),
        "seed": study.config.study.seed,
        "version": 3,  # 2: candidates; 3: signatures hash the sorted inputs (XOR of ids can cancel)
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _process_occupations(
    study: Study, state: _EmbedState, run: StageRun, *, embedded: int, progress: bool
) -> None:
    con = study.con
    cfg = study.config.neighbors
    model = state.fingerprint
    spec = IndexSpec(
        kind=cfg.index,
        nlist=cfg.nlist,
        nprobe=cfg.nprobe,
        hnsw_m=cfg.hnsw_m,
        ef_search=cfg.ef_search,
        seed=study.config.study.seed,
    )
    study.sql("neighbors/50_inputs", model=model, config=_config_signature(study, model))
    inputs = dicts(con.execute("SELECT * FROM _nb_inputs ORDER BY occupation"))
    done = dict(con.execute("SELECT occupation, signature FROM neighbors_progress").fetchall())
    with study.transaction():
        study.sql("neighbors/80_stale")
    todo = [o for o in inputs if done.get(o["occupation"]) != o["signature"]]
    index_dir = refuse_links(  # an index folder under the study: never through a link
        study.root,
        (study.config.resolve(cfg.index_dir) if cfg.index_dir else study.root / "indexes")
        / slug(model),
    )
    use_torch_gpu = state.device.startswith("cuda") and not faiss_gpu_available()
    recalls: list[float] = []
    kinds: dict[str, int] = {}
    bar = EngineProgress("neighbors: occupations", "occ", enabled=progress and bool(todo))
    for occ in track(todo, bar, lambda o: printable(o["occupation"][:20])):
        result = _one_occupation(
            study, state.cache, occ, spec, index_dir, model, use_torch_gpu=use_torch_gpu
        )
        if result["recall"] is not None:
            recalls.append(result["recall"])
        if result["index_kind"]:
            kinds[result["index_kind"]] = kinds.get(result["index_kind"], 0) + 1

    _report(study, run, inputs, model)
    _record(study, run, state, kinds, len(inputs), len(todo), use_torch_gpu)
    if recalls:
        run.provenance["recall_at_k_mean"] = float(np.mean(recalls))
    run.outputs["indexes"] = str(index_dir)
    run.rows_out = study.count("samples", "strategy IN ('nn', 'nn_no_indicators')")
    run.skipped = not todo and embedded == 0


def _record(
    study: Study,
    run: StageRun,
    state: _EmbedState,
    kinds: dict[str, int],
    n_inputs: int,
    n_todo: int,
    use_torch_gpu: bool,
) -> None:
    """The embedder, index and search settings of this run, in its provenance."""
    cfg = study.config.neighbors
    run.provenance.update(
        {
            "model_id": state.fingerprint,
            "model": cfg.model,
            "k": cfg.k,
            "index": cfg.index,
            "index_kinds_built": kinds,
            "occupations": n_inputs,
            "occupations_computed": n_todo,
            "occupations_skipped": n_inputs - n_todo,
            "device": state.device,
            "search": "torch-gpu"
            if use_torch_gpu
            else ("faiss-gpu" if faiss_gpu_available() else "faiss-cpu"),
        }
    )
    if state.probed is not None:
        run.provenance["embedder"] = state.probed
    elif state.worker_provenance is not None:
        run.provenance["embedder"] = state.worker_provenance


def _gather(cache: EmbeddingCache, paths: Any, rows: Any) -> np.ndarray:
    return cache.gather(list(paths), np.asarray(rows, dtype=np.int64))


def _top_k(
    index_or_x: Any,
    x: np.ndarray,
    q: np.ndarray,
    ids: np.ndarray,
    k: int,
    spec: IndexSpec,
    *,
    use_torch_gpu: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (scores, caption ids) per query, ties at equal score broken by caption id."""
    n = len(ids)
    kk = min(n, k + TIE_MARGIN)
    if kk == 0 or len(q) == 0:
        return np.empty((len(q), 0), np.float32), np.empty((len(q), 0), np.int64)
    if use_torch_gpu and index_kind(index_or_x) == "flat":
        res = torch_exact_search(x, q, kk)
    else:
        res = search(index_or_x, q, kk, spec=spec)
    k_out = min(n, k)
    out_s = np.empty((len(q), k_out), np.float32)
    out_i = np.empty((len(q), k_out), np.int64)
    for j in range(len(q)):
        valid = res.ids[j] >= 0
        cand = res.ids[j][valid]
        sc = res.scores[j][valid]
        order = np.lexsort((ids[cand], -sc))[:k_out]
        got = len(order)
        out_s[j, :got] = sc[order]
        out_i[j, :got] = ids[cand[order]]
        if got < k_out:  # an approximate index returned fewer than asked
            out_s[j, got:] = np.nan
            out_i[j, got:] = -1
    return out_s, out_i


def _load_or_build(x: np.ndarray, ids: np.ndarray, spec: IndexSpec, path: Path) -> tuple[Any, str]:
    """The occupation's index from disk when it holds exactly these ids, else built and saved."""
    kind = effective_kind(spec, len(ids))
    ids_path = path.with_name(f"{path.name}.ids.npy")
    index_path = path.with_name(f"{path.name}.{kind}.faiss")
    if index_path.is_file() and ids_path.is_file():
        try:
            stored = np.load(ids_path)
            if np.array_equal(stored, ids):
                return load_index(index_path, mmap=True), str(index_path)
        except (OSError, ValueError, RuntimeError):
            pass  # unreadable leftovers of a killed run: rebuild
    index = build_index(x, spec)
    save_index(index, index_path)
    with atomic_path(ids_path) as tmp:
        np.save(tmp, ids)
    return index, str(index_path)


def _one_occupation(
    study: Study,
    cache: EmbeddingCache,
    occ: dict[str, Any],
    spec: IndexSpec,
    index_dir: Path,
    model: str,
    *,
    use_torch_gpu: bool,
) -> dict[str, Any]:
    k = study.config.neighbors.k
    k_ranked = study.config.select.candidates(k)  # candidates kept per prompt
    name = occ["occupation"]
    caps = study.sql("neighbors/60_captions", occupation=name, model=model).fetchnumpy()
    prompts = study.sql("neighbors/61_prompts", occupation=name, model=model).fetchall()
    samples = study.sql("neighbors/62_samples", occupation=name).fetchall()

    ids = np.asarray(caps["caption_id"], dtype=np.int64)
    labels = np.asarray(caps["label"], dtype=object)
    x = _gather(cache, caps["path"], caps["row"]) if len(ids) else np.empty((0, 0), np.float32)
    prompt_ids = [p[0] for p in prompts]
    q = _gather(cache, [p[1] for p in prompts], [p[2] for p in prompts])
    none_mask = labels == "none"

    sample_rows: list[tuple[str, str, int, int, float]] = []
    diag: list[dict[str, Any]] = []
    index_kind_built, index_path, recall = None, None, None
    subsets = {"nn": (x, ids), "nn_no_indicators": (x[none_mask], ids[none_mask])}
    for strategy, (xs, sids) in subsets.items():
        if len(sids) == 0 or not prompt_ids:
            for pid in prompt_ids:
                diag.append(_diag_row(strategy, pid, 0, None, True, None))
            continue
        if strategy == "nn":
            index, index_path = _load_or_build(xs, sids, spec, index_dir / slug(name))
            index_kind_built = index_kind(index)
        else:
            index = build_index(xs, spec)
        scores, found = _top_k(index, xs, q, sids, k_ranked, spec, use_torch_gpu=use_torch_gpu)
        per_query_recall: list[float | None] = [None] * len(prompt_ids)
        if index_kind(index) != "flat":
            exact = numpy_exact_search(xs, q, min(k_ranked, len(sids)))
            per_query_recall = [
                recall_at_k(found[j : j + 1], sids[exact.ids[j : j + 1]])
                for j in range(len(prompt_ids))
            ]
            if strategy == "nn":
                recall = float(np.mean(per_query_recall))
        for j, pid in enumerate(prompt_ids):
            ok = found[j] >= 0
            for r, (cid, sc) in enumerate(zip(found[j][ok], scores[j][ok], strict=True), start=1):
                sample_rows.append((strategy, pid, int(cid), r, float(sc)))
            top = scores[j][ok][:k]  # the diagnostic describes the first k of the ranked list
            n = len(top)
            mean = float(np.mean(top, dtype=np.float64)) if n else None
            diag.append(_diag_row(strategy, pid, n, mean, n < k, per_query_recall[j]))
    diag += _fixed_subset_diag(ids, x, q, prompt_ids, samples, study.config.select.sample_size)
    _write(study, occ, model, sample_rows, diag, index_kind_built, index_path)
    return {"recall": recall, "index_kind": index_kind_built}


def _fixed_subset_diag(
    ids: np.ndarray,
    x: np.ndarray,
    q: np.ndarray,
    prompt_ids: list[str],
    samples: list[tuple[str, int]],
    want: int,
) -> list[dict[str, Any]]:
    """Diagnostics of the keyword / no_indicators subsets: the same captions (the first
    ``want`` of the ranked sample) against every prompt of the occupation."""
    diag = []
    pos = {int(c): i for i, c in enumerate(ids)}
    for strategy in ("keyword", "no_indicators"):
        # the first N captions of the ranked list (samples come in rank order)
        members = [pos[c] for s, c in samples if s == strategy and c in pos][:want]
        if members:
            sims = x[np.asarray(members)] @ q.T if len(prompt_ids) else np.empty((0, 0))
        for j, pid in enumerate(prompt_ids):
            n = len(members)
            mean = float(np.mean(sims[:, j], dtype=np.float64)) if n else None
            diag.append(_diag_row(strategy, pid, n, mean, n < want, None))
    return diag


def _diag_row(
    strategy: str, prompt_id: str, n: int, mean: float | None, short: bool, recall: float | None
) -> dict[str, Any]:
    return {
        "strategy": strategy,
        "prompt_id": prompt_id,
        "n_captions": n,
        "mean_similarity": mean,
        "short_of_k": bool(short),
        "recall_at_k": recall,
    }


def _write(
    study: Study,
    occ: dict[str, Any],
    model: str,
    sample_rows: list[tuple[str, str, int, int, float]],
    diag: list[dict[str, Any]],
    index_kind_built: str | None,
    index_path: str | None,
) -> None:
    con = study.con
    new_samples = pa.table(
        {
            "strategy": pa.array([r[0] for r in sample_rows], pa.string()),
            "prompt_id": pa.array([r[1] for r in sample_rows], pa.string()),
            "caption_id": pa.array([r[2] for r in sample_rows], pa.int64()),
            "rank": pa.array([r[3] for r in sample_rows], pa.int32()),
            "score": pa.array([r[4] for r in sample_rows], pa.float64()),
        }
    )
    new_diag = pa.Table.from_pylist(
        diag,
        schema=pa.schema(
            [
                ("strategy", pa.string()),
                ("prompt_id", pa.string()),
                ("n_captions", pa.int32()),
                ("mean_similarity", pa.float64()),
                ("short_of_k", pa.bool_()),
                ("recall_at_k", pa.float64()),
            ]
        ),
    )
    con.register("_nb_new_samples", new_samples)
    con.register("_nb_new_diag", new_diag)
    try:
        with study.transaction():
            study.sql(
                "neighbors/70_write",
                occupation=occ["occupation"],
                model=model,
                signature=occ["signature"],
                n_captions=int(occ["n_captions"]),
                n_none=int(occ["n_none"]),
                n_prompts=int(occ["n_prompts"]),
                index_kind=index_kind_built,
                index_path=index_path,
            )
    finally:
        con.unregister("_nb_new_samples")
        con.unregister("_nb_new_diag")


# -- report ----------------------------------------------------------------------------------


def _report(study: Study, run: StageRun, inputs: list[dict[str, Any]], model: str) -> None:
    """Summary table (per-strategy averages) and messages about short or empty occupations."""
    k = study.config.neighbors.k
    cur = study.sql("neighbors/90_summary")
    run.summary = dicts(cur)
    for row in run.summary:
        ref = PAPER_LAION.get(row["strategy"])
        row["paper_laion"] = ref
    empty = [o["occupation"] for o in inputs if o["n_captions"] == 0 and o["n_prompts"] > 0]
    if empty:
        run.messages.append(
            f"{len(empty)} occupation(s) have no captions in `mentions`, so no nn samples: "
            + _names(empty)
        )
    no_prompts = [o["occupation"] for o in inputs if o["n_prompts"] == 0]
    if no_prompts:
        run.messages.append(
            f"{len(no_prompts)} occupation(s) have captions but no prompts (not in the prompt set), "
            "so no nn samples: " + _names(no_prompts)
        )
    for key, label in (("n_captions", "nn"), ("n_none", "nn_no_indicators")):
        short = [
            f"{o['occupation']} ({o[key]})" for o in inputs if 0 < o[key] < k and o["n_prompts"] > 0
        ]
        if short:
            run.messages.append(
                f"{label}: {len(short)} occupation(s) have fewer than k={k} captions and get all "
                f"of them (short_of_k): " + _names(short)
            )
    unlabelled = sum(int(o["n_unlabelled"]) for o in inputs)
    if unlabelled:
        run.messages.append(
            f"{unlabelled} caption-occupation pairs have no indicator label and are left out of "
            "nn_no_indicators (rerun `indicators`)"
        )
        run.drop("no_indicator_label", unlabelled)
    run.messages.append(
        "mean caption-prompt cosine similarity per strategy above; the paper (LAION): "
        "keyword 0.385, nn 0.704"
    )


def _names(items: list[str], limit: int = 12) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")
