"""CLIP image-image similarity of training subsets and generated sets (METHODS 1.5 diagnostics).

The paper checks that nearest-neighbour subsets are closer to what the model generates: the
mean CLIP image-image cosine between a training subset's images and the generated images of
the same (occupation, prompt) rose by 13 % with NN selection. Per (model, strategy,
occupation, prompt template) this module computes

    mean_cosine = mean over pairs (t, g) of cos(e_t, e_g) = mean_t(e_t) . mean_g(e_g)

over the labelled (female/male) images behind T (the subset after the cut) and G, with
``e`` the L2-normalised image embeddings of the configured CLIP model (``label.clip_model``,
``label.clip_pretrained``, whole images, never a face crop), in [-1, 1].
``analysis.image_similarity``: ``auto`` computes it when ``label.classifier`` is ``clip``,
``on`` always (an unloadable model is an error), ``off`` never.

Embeddings are cached in the embedding cache (``neighbors.cache_dir`` or the default) under a
fingerprint of the model id (and the seed for random weights), keyed by the image file's
resolved path, size and modification time: a rerun embeds nothing, a changed file again.
Unreadable files are left out (counted in the run messages).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from corpus_audit.backends.classifiers import ClipClassifier, classifier_backend
from corpus_audit.backends.embeddings import EmbeddingCache, default_cache_dir
from corpus_audit.backends.engines.base import Progress, progress_bar
from corpus_audit.backends.engines.models import ModelSpec, model_session
from corpus_audit.core.errors import ModelError
from corpus_audit.core.imagefile import study_image_path, try_read_rgb
from corpus_audit.core.store import StageRun, Study, dicts
from corpus_audit.methods.image_similarity import summary

CHUNK = 512  # images decoded and embedded per cache part


def enabled(study: Study) -> bool:
    """Whether ``analyze`` computes the diagnostic (see the module docstring)."""
    mode = study.config.analysis.image_similarity
    if mode != "auto":
        return mode == "on"
    try:
        return classifier_backend(study.config.label.classifier).clip_images
    except ModelError:  # not a registered classifier: off here, the analysis names the problem
        return False


def _file_key(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    blob = f"{os.path.realpath(path)}\x00{st.st_size}\x00{st.st_mtime_ns}".encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def image_similarity_rows(
    study: Study, run: StageRun, *, progress: bool = True
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of ``image_similarity`` and provenance (needs ``analysis_labelled`` and the cut).
    The CLIP model is a model worker (:func:`clip_spec`) on ``run``'s engine."""
    images = dicts(study.sql("analyze/image_sets"))
    if not images:
        return [], {"images": 0}
    seed = study.config.study.seed
    paths = [str(study_image_path(study.root, r["path"])) for r in images]
    with _clip(study, run) as clip:
        clip_id, _ = clip([])  # the model's id (its resolved weights) keys the cache
        vectors, unreadable, embedded = _embeddings(study, clip, clip_id, paths, seed, progress)
    rows = _pair_rows(_sums(images, vectors), clip_id)
    prov = {"clip_model": clip_id, "images": len(images), "embedded": embedded}
    if unreadable:
        prov["unreadable"] = unreadable
    return rows, prov


def clip_spec(study: Study) -> ModelSpec:
    """The CLIP worker's recipe (picklable): ``label.clip_model``/``clip_pretrained`` with
    ``label.texts``, ``engine.device``, ``label.clip_precision``, ``label.batch_size`` and
    the study seed (random weights), serving :func:`embed_images`."""
    label = study.config.label
    options = {
        "device": study.config.engine.device,
        "precision": label.clip_precision,
        "batch_size": label.batch_size,
        "seed": study.config.study.seed,
    }
    args = (label.clip_model, label.clip_pretrained, label.texts)
    return ModelSpec(ClipClassifier, args, embed_images, options)


def embed_images(model: Any, arrays: list[np.ndarray]) -> tuple[str, np.ndarray | None]:
    """The ``serve`` of the CLIP worker: its id and the unit embeddings of ``arrays`` (RGB
    uint8 images; None for an empty list)."""
    return model.id, model.image_embeddings(arrays) if arrays else None


@contextlib.contextmanager
def _clip(study: Study, run: StageRun) -> Iterator[Callable[[Any], Any]]:
    """The CLIP worker as a callable: a model session on the run's engine, closed on leaving."""
    with model_session(study.config.engine, "analyze", clip_spec(study), run=run) as session:
        yield session


def _sums(images: list[dict[str, Any]], vectors: list[Any]) -> dict[tuple, list]:
    """Per image set (side, model, strategy, occupation, prompt): [sum of its unit vectors,
    images embedded, template]; unreadable images (vector None) are left out."""
    sums: dict[tuple, list] = {}
    for r, v in zip(images, vectors, strict=True):
        if v is None:
            continue
        key = (r["side"], r["model_id"], r["strategy"], r["occupation"], r["prompt_id"])
        acc = sums.setdefault(key, [np.zeros_like(v, dtype=np.float64), 0, r["template_id"]])
        acc[0] += v
        acc[1] += 1
    return sums


def _pair_rows(sums: dict[tuple, list], clip_model: str) -> list[dict[str, Any]]:
    """``image_similarity`` rows: each training set against the generated sets of its
    occupation and template (a per-occupation subset against every template); the mean
    cosine over all pairs is the dot product of the two mean vectors."""
    generated = defaultdict(list)
    for (side, mdl, _, occ, pid), (total, n, template) in sums.items():
        if side == "generated":
            generated[(occ, template)].append((mdl, pid, total / n, n))
    rows = []
    for (side, _, strategy, occ, pid), (total, n, template) in sorted(
        sums.items(), key=lambda kv: tuple("" if x is None else str(x) for x in kv[0])
    ):
        if side != "training":
            continue
        mean_t = total / n
        templates = (
            [template] if pid is not None else sorted({t for (o, t) in generated if o == occ})
        )
        for t in templates:
            for mdl, gpid, mean_g, n_g in generated.get((occ, t), []):
                rows.append(
                    {
                        "model_id": mdl,
                        "strategy": strategy,
                        "occupation": occ,
                        "template_id": t,
                        "prompt_id": gpid,
                        "n_training": n,
                        "n_generated": n_g,
                        "mean_cosine": float(mean_t @ mean_g),
                        "clip_model": clip_model,
                    }
                )
    return rows


def _embeddings(
    study: Study,
    clip: Callable[[Any], Any],
    clip_id: str,
    paths: list[str],
    seed: int,
    progress: bool,
) -> tuple[list[np.ndarray | None], int, int]:
    """Per path its embedding (None when unreadable), from the cache or computed now by
    ``clip`` (the worker :func:`embed_images` serves) of model ``clip_id``."""
    cfg = study.config
    root = cfg.resolve(cfg.neighbors.cache_dir) if cfg.neighbors.cache_dir else default_cache_dir()
    tag = clip_id + (f"|seed={seed}" if clip_id.endswith("/random") else "")
    cache = EmbeddingCache(root, "clip-image-" + hashlib.sha256(tag.encode()).hexdigest()[:16])
    keys = [_file_key(p) for p in paths]
    found = cache.lookup(k for k in keys if k)
    todo = list(
        dict.fromkeys((k, p) for k, p in zip(keys, paths, strict=True) if k and k not in found)
    )
    unreadable = 0
    bad: set[str] = set()
    with progress_bar(
        Progress("analyze: image embeddings", "img", len(todo), progress and bool(todo))
    ) as bar:
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start : start + CHUNK]
            arrays, ok = [], []
            for key, path in chunk:
                array, _ = try_read_rgb(path, max_pixels=cfg.images.max_pixels)
                if array is None:
                    bad.add(key)
                    continue
                arrays.append(array)
                ok.append(key)
            if arrays:
                cache.ensure({"model": clip_id, "kind": "clip image embeddings"})
                cache.add(ok, clip(arrays)[1])
            bar.update(len(chunk))
    if todo:
        found = cache.lookup(k for k in keys if k)
    out: list[np.ndarray | None] = []
    present = [(i, found[k]) for i, k in enumerate(keys) if k and k in found]
    gathered = cache.gather([f for _, (f, _) in present], [r for _, (_, r) in present])
    vectors: dict[int, np.ndarray] = {i: gathered[j] for j, (i, _) in enumerate(present)}
    for i, k in enumerate(keys):
        out.append(vectors.get(i))
        if k is None or k in bad:
            unreadable += 1
    return out, unreadable, len(todo) - len(bad)


PAPER_NN_CHANGE_PCT = 13.0  # the paper: NN subsets raised the image-image similarity by 13 %


def summary_messages(rows: list[dict[str, Any]]) -> list[str]:
    """One line per model: the mean image-image cosine per strategy, NN's change vs keyword."""
    lines = []
    table = summary(rows)
    for model in sorted({r["model_id"] for r in table}):
        mine = [r for r in table if r["model_id"] == model]
        parts = []
        for r in mine:
            text = f"{r['strategy']} {r['mean_cosine']:.3f}"
            if r["change_vs_keyword_pct"] is not None:
                text += f" ({r['change_vs_keyword_pct']:+.1f} % vs keyword)"
            parts.append(text)
        lines.append(
            f"CLIP image-image similarity, training vs generated ({model}): "
            + ", ".join(parts)
            + f"; the paper: NN {PAPER_NN_CHANGE_PCT:+.0f} % vs keyword"
        )
    return lines
