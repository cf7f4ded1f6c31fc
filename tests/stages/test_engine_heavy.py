"""The model stages on the Ray engine write the tables of a local run: ``neighbors``'
embedding (the same cache bytes and nn samples), ``label`` (the same rows), ``generate``
(the same pixels, a tiny random SD), ``recaption`` (the same rows, a tiny random BLIP) and
``llm_texts`` (the same texts in the same commit order, tiny random LMs), on CPU actors
(``engine.gpus_per_worker = 0``); in each, an actor killed on its first unit is restarted by
Ray and the tables still equal the local run. ``engine.workers`` sets the actors per stage,
and every run records the engine it ran on.

Real data (LAION captions and real photos of ../shared/data and PyPI packages), the real
select, indicators, MediaPipe and agegender, the real SBERT model (all-MiniLM-L6-v2,
offline). The Ray cluster is one local cluster for the module (2 CPUs, the machine's
cores), which the stages join; the tests skip, saying why, when the ``ray`` extra is not
installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_generate import tiny_sd, tokenizer_dir  # noqa: F401 - fixtures lent to this module
from test_recaption_models import tiny_captioners  # noqa: F401 - the tiny BLIP and GIT

from corpus_audit.backends.engines import open_engine
from corpus_audit.backends.engines.faults import FailingWorkerFactory
from corpus_audit.core.pipeline import init_study, stage_function
from corpus_audit.core.store import Study
from corpus_audit.stages import neighbors as nb_module

NN_TABLES = {
    "samples": "SELECT strategy, prompt_id, caption_id, rank, score FROM samples "
    "WHERE strategy IN ('nn', 'nn_no_indicators')",
    "similarity_diagnostics": "SELECT strategy, prompt_id, n_captions, mean_similarity, "
    "short_of_k, recall_at_k FROM similarity_diagnostics",
    "caption_embeddings": "SELECT caption_id, model_id FROM caption_embeddings",
    "prompt_embeddings": "SELECT prompt_id, model_id FROM prompt_embeddings",
}


@pytest.fixture(scope="module")
def ray_cluster():
    pytest.importorskip(
        "ray", reason="ray is not installed (pip install 'corpus_audit[ray]'): Ray engine untested"
    )
    engine = open_engine("ray", num_cpus=2, object_store_memory=256 * 2**20)
    engine.describe()  # starts the cluster; the stages join it (and leave it running)
    yield engine
    engine.close()


def kill_first_actor(monkeypatch, owner, name: str, tmp_path: Path) -> Path:
    """Patch the factory ``owner.name`` (a spec class, or a method returning a spec) so the
    actors it builds die (``os._exit``) on the first unit one of them serves, once; returns
    the marker folder, which then holds one file per fault that happened."""
    markers = tmp_path / "markers"
    markers.mkdir()
    real = getattr(owner, name)
    monkeypatch.setattr(
        owner, name, lambda *a: FailingWorkerFactory(real(*a), markers, how="exit", limit=1)
    )
    return markers


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, laion_path: Path) -> Path:
    d = tmp_path_factory.mktemp("heavy_corpus")
    pq.write_table(pq.read_table(laion_path).slice(0, 1000), d / "laion1k.parquet")
    return d


def _study(root: Path, corpus: Path, engine: str) -> Study:
    return init_study(
        root,
        [str(corpus)],
        overrides={
            "select": {"sample_size": 10, "sample_unit": "captions"},
            "indicators": {"use_names": False},
            "neighbors": {"k": 8, "cache_dir": str(root / "cache"), "chunk_size": 64},
            "engine": {"engine": engine, "threads": 2},
        },
    )


def _run_neighbors(root: Path, corpus: Path, engine: str, workers: dict | None = None) -> dict:
    study = _study(root, corpus, engine)
    if workers is not None:
        study.config.engine.workers = workers
    try:
        for stage in ("select", "indicators", "neighbors"):
            run = stage_function(stage)(study, progress=False)
        tables = {
            name: study.con.execute(sql + " ORDER BY ALL").fetchall()
            for name, sql in NN_TABLES.items()
        }
        stored = study.last_run("neighbors")["provenance"]
        return {
            "run": run,
            "stored": stored,
            "tables": tables,
            "cache": _cache(Path(run.provenance["cache_dir"])),
        }
    finally:
        study.close()


def _cache(cache_dir: Path) -> dict:
    """The cache's bytes, part names aside (parts are named by a fresh uuid): meta.json, and
    per part its keys and the bytes of its ``.npy`` (header and vectors)."""
    parts = []
    for keys_file in sorted(cache_dir.glob("part-*.keys.parquet")):
        keys = tuple(pq.read_table(keys_file).column("key").to_pylist())
        npy = keys_file.with_name(keys_file.name[: -len(".keys.parquet")] + ".npy")
        parts.append((keys, npy.read_bytes()))
    return {"meta": (cache_dir / "meta.json").read_bytes(), "parts": sorted(parts)}


@pytest.fixture(scope="module")
def local_neighbors(tmp_path_factory, corpus) -> dict:
    return _run_neighbors(tmp_path_factory.mktemp("local") / "s", corpus, "local")


def _assert_same(got: dict, expected: dict) -> None:
    for name, rows in expected["tables"].items():
        assert rows, f"{name} is empty: the comparison would prove nothing"
        assert got["tables"][name] == rows, name
    assert got["cache"]["meta"] == expected["cache"]["meta"]
    assert len(got["cache"]["parts"]) == len(expected["cache"]["parts"]) > 2  # several units
    assert got["cache"]["parts"] == expected["cache"]["parts"]  # same keys, same bytes


def test_neighbors_on_ray_writes_the_local_cache_and_samples(
    ray_cluster, tmp_path, corpus, local_neighbors
):
    got = _run_neighbors(tmp_path / "s", corpus, "ray")
    _assert_same(got, local_neighbors)
    run = got["run"]
    assert run.provenance["engine"]["engine"] == "ray"
    assert run.provenance["engine"]["cpus"] == 2
    assert run.provenance["embedded"] == local_neighbors["run"].provenance["embedded"]
    assert run.provenance["embedder"] == local_neighbors["run"].provenance["embedder"]
    meta = json.loads(got["cache"]["meta"])
    assert meta["fingerprint"] == run.provenance["model_id"]


def test_engine_workers_sets_the_embedders_and_every_run_names_its_engine(
    ray_cluster, tmp_path, corpus, local_neighbors, monkeypatch
):
    """``engine.workers = {indicators = 1, neighbors = 1}``: one tagger and one embedder actor
    (seen where the driver opens each pool), the same tables; a Ray run records the cluster,
    the local neighbors run, which opens no engine, is recorded as local."""
    from corpus_audit.backends.engines.ray_backend import RayEngine

    asked = []
    real = RayEngine.actor_pool

    def spy(self, actors, resources):
        asked.append(actors.workers)
        return real(self, actors, resources)

    monkeypatch.setattr(RayEngine, "actor_pool", spy)
    workers = {"indicators": 1, "neighbors": 1}
    got = _run_neighbors(tmp_path / "s", corpus, "ray", workers=workers)
    # indicators' taggers, neighbors' probe (its embedder's fingerprint), then its embedders
    assert asked == [1, 1, 1]
    _assert_same(got, local_neighbors)
    assert got["stored"]["engine"]["engine"] == "ray"
    local = local_neighbors["stored"]["engine"]
    assert local["engine"] == "local" and local["threads"] == 2 and local["cpus"] >= 1


def test_neighbors_on_ray_survives_a_killed_embedder(
    ray_cluster, tmp_path, corpus, local_neighbors, monkeypatch
):
    """The first chunk kills its actor (os._exit); Ray restarts it, the chunk is redone, and
    the cache holds each chunk once."""
    markers = kill_first_actor(monkeypatch, nb_module._EmbedState, "spec", tmp_path)
    got = _run_neighbors(tmp_path / "s", corpus, "ray")
    assert len(list(markers.iterdir())) == 1  # the fault did happen
    _assert_same(got, local_neighbors)


def test_gpus_per_worker_and_workers_are_validated(tmp_path, corpus):
    from corpus_audit.core.config import ConfigError, load_config

    _study(tmp_path / "s", corpus, "local").close()
    toml = tmp_path / "s" / "study.toml"
    text = toml.read_text()
    toml.write_text(text.replace("gpus_per_worker = 0.0", "gpus_per_worker = -0.5"))
    with pytest.raises(ConfigError, match=r"engine\.gpus_per_worker: -0.5 is not in \[0, 64\]"):
        load_config(toml.parent)
    toml.write_text(text.replace("gpus_per_worker = 0.0", "gpus_per_worker = 0.25"))
    assert load_config(toml.parent).engine.gpus_per_worker == 0.25
    for bad, message in (
        ("{ select = 2 }", r"engine\.workers\.select: not a stage with model workers"),
        ("{ label = -1 }", r"engine\.workers\.label: -1 must be >= 0"),
        ('{ label = "4" }', r"engine\.workers\.label: expected int, got str '4'"),
        ("{ label = 5000 }", r"engine\.workers\.label: 5000 is above the maximum"),
    ):
        toml.write_text(text.replace("workers = {}", f"workers = {bad}"))
        with pytest.raises(ConfigError, match=message):
            load_config(toml.parent)
    toml.write_text(text.replace("workers = {}", "workers = { label = 4, generate = 1 }"))
    engine = load_config(toml.parent).engine
    assert (engine.workers_for("label"), engine.workers_for("generate")) == (4, 1)
    assert engine.workers_for("neighbors") == 0


# -- label -------------------------------------------------------------------------------------
LABEL_TABLES = {
    "face_filter": "SELECT * FROM face_filter",
    "faces": "SELECT * FROM faces",
    "labels": "SELECT image_id, classifier, p_female, label, threshold FROM labels",
    # the perceived attributes are the worker's work too (same model, same rows on Ray)
    "perceived_age": "SELECT * FROM perceived_age",
    "skin_tone": "SELECT * FROM skin_tone",
}


def _label_tables(make_study, laion_path, tmp_path, engine: str, name: str) -> tuple[dict, object]:
    """test_label's study (5 real photos, 8 bad files, a webdataset shard, a generated image)
    labelled with the real MediaPipe detector and agegender classifier, 4 images a batch."""
    from test_label import _build

    from corpus_audit.stages.label import label

    study, _ = _build(make_study, laion_path, tmp_path, name=name)
    study.config.label.batch_size = 4
    study.config.engine.engine = engine
    run = label(study, progress=False)
    tables = {
        name: study.con.execute(sql + " ORDER BY ALL").fetchall()
        for name, sql in LABEL_TABLES.items()
    }
    return tables, run


@pytest.mark.filterwarnings("ignore:clip classifier .*random:UserWarning")
def test_label_on_ray_writes_the_local_rows_and_survives_a_killed_actor(
    ray_cluster, make_study, laion_path, tmp_path, monkeypatch
):
    import corpus_audit.stages.label as label_module

    local, local_run = _label_tables(make_study, laion_path, tmp_path, "local", "l")
    for name, rows in local.items():
        assert rows, f"{name} is empty: the comparison would prove nothing"
    got, run = _label_tables(make_study, laion_path, tmp_path, "ray", "r")
    assert got == local
    assert run.provenance["engine"]["engine"] == "ray"
    assert run.rows_out == local_run.rows_out and run.dropped == local_run.dropped

    markers = kill_first_actor(monkeypatch, label_module, "labeller_spec", tmp_path)
    again, _ = _label_tables(make_study, laion_path, tmp_path, "ray", "k")
    assert len(list(markers.iterdir())) == 1  # an actor did die on its first batch
    assert again == local


# -- generate ----------------------------------------------------------------------------------
def _generated(make_study, laion_path, model: Path, engine: str, name: str) -> tuple[dict, object]:
    """test_generate's study (2 occupations x 2 templates, 3 images each, batches of 4) run
    with the tiny random SD pipeline; the rows and every image's pixels."""
    from PIL import Image
    from test_generate import TINY, fill_tables

    from corpus_audit.stages.generate import generate

    study = make_study(
        [laion_path],
        name=name,
        generate={"models": [str(model)], "images_per_prompt": 3, "batch_size": 4, **TINY},
        engine={"device": "cpu", "engine": engine, "threads": 2},
    )
    fill_tables(study, laion_path)
    run = generate(study, progress=False)
    rows = study.con.execute(
        "SELECT image_id, prompt_id, path, seed, nsfw, prompt_text FROM images "
        "WHERE source = 'generated' ORDER BY ALL"
    ).fetchall()
    pixels = {}
    for image_id, _, path, *_ in rows:
        with Image.open(study.root / path) as im:
            pixels[image_id] = im.convert("RGB").tobytes()
    return {"rows": rows, "pixels": pixels}, run


def test_generate_on_ray_draws_the_local_pixels_and_survives_a_killed_actor(
    ray_cluster,
    make_study,
    laion_path,
    tiny_sd,  # noqa: F811 - the fixture
    monkeypatch,
    tmp_path,
):
    import torch

    import corpus_audit.stages.generate as generate_module

    # CPU pixels depend on torch's intra-op thread count (the order of float sums; 4 of the
    # 12 tiny images differ by 1 level in 1 pixel between 2 threads and 1): the reference
    # runs with the threads of a 1-CPU Ray actor (Ray sets OMP_NUM_THREADS=1 for it)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local, _ = _generated(make_study, laion_path, tiny_sd, "local", "gl")
    finally:
        torch.set_num_threads(threads)
    assert len(local["rows"]) == 12
    got, run = _generated(make_study, laion_path, tiny_sd, "ray", "gr")
    assert got == local
    assert run.provenance["engine"]["engine"] == "ray"

    markers = kill_first_actor(monkeypatch, generate_module, "generator_spec", tmp_path)
    again, _ = _generated(make_study, laion_path, tiny_sd, "ray", "gk")
    assert len(list(markers.iterdir())) == 1  # an actor did die on its first batch
    assert again == local


# -- recaption ---------------------------------------------------------------------------------
RECAPTION_SQL = (
    "SELECT variant, image_id, caption, skip_reason, detail, model_id, settings_fingerprint "
    "FROM recaptions ORDER BY ALL"
)


def _recaptioned(make_study, laion_path, tmp_path, model: Path, engine: str, name: str) -> tuple:
    """test_label's study (14 training images: 5 real photos, the 8 bad files, a webdataset
    shard's photo) recaptioned by the tiny BLIP, 4 images a batch (4 batches)."""
    from test_label import _build

    from corpus_audit.stages.recaption import recaption_stage

    study, _ = _build(make_study, laion_path, tmp_path, name=name)
    study.config.recaption.model = str(model)
    study.config.recaption.batch_size = 4
    study.config.recaption.max_new_tokens = 6
    study.config.engine.engine = engine
    run = recaption_stage(study, progress=False)
    return study.con.execute(RECAPTION_SQL).fetchall(), run


def test_recaption_on_ray_writes_the_local_rows_and_survives_a_killed_actor(
    ray_cluster,
    make_study,
    laion_path,
    tiny_captioners,  # noqa: F811 - the fixture
    monkeypatch,
    tmp_path,
):
    import torch

    import corpus_audit.stages.recaption as recaption_module

    blip = tiny_captioners["blip"]
    # the reference runs with the torch threads of a 1-CPU Ray actor (Ray sets
    # OMP_NUM_THREADS=1 for it), as the generate test does: CPU float sums can depend on the
    # intra-op thread count. A precaution here: the tiny BLIP gave the same captions of 54
    # real photos with 1 and 2 threads (checked by hand), unlike the tiny SD's pixels
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local, local_run = _recaptioned(make_study, laion_path, tmp_path, blip, "local", "cl")
    finally:
        torch.set_num_threads(threads)
    reasons = [r[3] for r in local]
    assert len(local) == 14 and reasons.count(None) >= 5 and "unreadable" in reasons

    got, run = _recaptioned(make_study, laion_path, tmp_path, blip, "ray", "cr")
    assert got == local
    assert run.provenance["engine"]["engine"] == "ray"
    assert (run.rows_in, run.rows_out, run.dropped) == (
        local_run.rows_in,
        local_run.rows_out,
        local_run.dropped,
    )
    assert run.provenance["captioner"] == local_run.provenance["captioner"]  # cpu, float32

    markers = kill_first_actor(monkeypatch, recaption_module, "captioner_spec", tmp_path)
    again, _ = _recaptioned(make_study, laion_path, tmp_path, blip, "ray", "ck")
    assert len(list(markers.iterdir())) == 1  # an actor did die on its first batch
    assert again == local


def test_text_rewrite_on_ray_gives_the_local_rows(ray_cluster, tmp_path):
    """A text-rewrite captioner (``paraphrase:``, the tiny random T5) on Ray caption actors,
    no prepare task: the rows and counts of the local loop, batch by batch."""
    import pandas as pd

    from corpus_audit.backends.captioners import CaptionInput, CaptionSettings, load_captioner
    from corpus_audit.backends.engines.base import Resources
    from corpus_audit.backends.fakes.paraphrasers import random_paraphraser_model
    from corpus_audit.stages.recaption.driver import recaption, recaption_on_engine
    from corpus_audit.stages.recaption.on_engine import captioner_spec

    spec = f"paraphrase:{random_paraphraser_model(tmp_path / 't5', 't5')}"
    settings = CaptionSettings(max_new_tokens=8, batch_size=2)
    words = [("A nurse at work", "nurse"), (None, "nurse"), ("Chef in a kitchen", "chef"),
             ("a pilot on the runway", "pilot"), ("  ", "chef"), ("the doctor smiles", "doctor")]  # fmt: skip
    items = [CaptionInput(i, text=t, occupation=o) for i, (t, o) in enumerate(words)]
    items.append(items[0])  # a repeated key: skipped by both
    rewrite = load_captioner(spec, settings)
    local: list[pd.DataFrame] = []
    expected = recaption(rewrite, items, sink=local.append, done={5})
    rewrite.close()
    got: list[pd.DataFrame] = []
    summary = recaption_on_engine(
        ray_cluster,
        captioner_spec(spec, settings, rewrite.fingerprint),
        items,
        kind="text",
        sink=got.append,
        batch_size=settings.batch_size,
        done={5},
        resources=Resources(num_cpus=1),
        workers=1,
    )
    assert len(got) == len(local) == 3  # 5 pending items in batches of 2
    for a, b in zip(got, local, strict=True):
        pd.testing.assert_frame_equal(a, b)
    counts = ("items", "already_done", "duplicates", "captioned", "no_text", "batches")
    assert [getattr(summary, c) for c in counts] == [getattr(expected, c) for c in counts]
    assert (summary.captioned, summary.no_text, summary.settings["device"]) == (3, 2, "cpu")


# -- llm_texts ---------------------------------------------------------------------------------
LLM_TABLES = {
    # every column but created_at: text_ids are assigned at commit, so they prove the order
    "llm_texts": "SELECT * EXCLUDE (created_at) FROM llm_texts",
    "llm_pairs": "SELECT * EXCLUDE (updated_at) FROM llm_pairs",
    "llm_models": "SELECT * EXCLUDE (updated_at) FROM llm_models",
}


@pytest.fixture(scope="module")
def tiny_lms(tmp_path_factory) -> list[str]:
    """The tiny random Llama (chat template) and GPT-2 (plain text) of test_text_generators."""
    from corpus_audit.backends.fakes.text_models import random_causal_lm

    root = tmp_path_factory.mktemp("llm")
    return [
        f"transformers:{random_causal_lm(root / 'llama', 'llama')}",
        f"transformers:{random_causal_lm(root / 'gpt2', 'gpt2', chat_template=False)}",
    ]


def _llm_tables(root: Path, models: list[str], engine: str, **llm: object) -> tuple[dict, object]:
    """An LLM study (2 occupations x the persona prompt, unspecified + female: 4 pairs a
    model), n = 2, capped at 6 texts (abandon_below 0: gibberish names nobody, so the
    unspecified pairs run 3 rounds and are capped), 3 sequences a batch (batches span
    requests), run on ``engine``; its tables and the run."""
    from corpus_audit.stages.llm_texts import llm_texts

    study = init_study(
        root,
        [],
        overrides={
            "llm": {
                "enabled": True, "models": models, "only_occupations": ["cook", "nurse"],
                "only_prompts": ["persona"], "genders": ["female"], "n": 2, "max_texts": 6,
                "abandon_below": 0.0, "max_tokens": 6, "batch_size": 3, **llm,
            },
            "texts": {"source": "llm", "srbs": False},
            "engine": {"engine": engine, "threads": 2, "device": "cpu"},
        },
    )  # fmt: skip
    try:
        run = llm_texts(study, progress=False)
        tables = {
            name: study.con.execute(sql + " ORDER BY ALL").fetchall()
            for name, sql in LLM_TABLES.items()
        }
        return tables, run
    finally:
        study.close()


@pytest.fixture(scope="module")
def local_llm(tmp_path_factory, tiny_lms) -> dict:
    import torch

    # CPU float sums may depend on torch's intra-op thread count (the generate test's tiny
    # SD pipeline did): the reference runs with the threads of a 1-CPU Ray actor (Ray sets
    # OMP_NUM_THREADS=1). The tiny Llama wrote the same tables with 2 threads and 1 here, so
    # this is insurance for machines with more threads, not a known difference
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tables, _ = _llm_tables(tmp_path_factory.mktemp("llm_local") / "s", tiny_lms, "local")
    finally:
        torch.set_num_threads(threads)
    texts, pairs = tables["llm_texts"], tables["llm_pairs"]
    assert len(texts) == 2 * (4 * 2 + 2 * 2 + 2 * 2)  # per model: 3 rounds (8, 4, 4 texts)
    assert {row[4] for row in pairs} == {"done", "capped"}  # state: specified done, rest capped
    assert len(tables["llm_models"]) == 2
    return tables


def test_llm_texts_on_ray_writes_the_local_tables(ray_cluster, tmp_path, tiny_lms, local_llm):
    got, run = _llm_tables(tmp_path / "s", tiny_lms, "ray")
    assert got == local_llm  # text ids (commit order), texts, seeds, tokens, pairs, models
    assert run.provenance["engine"]["engine"] == "ray"
    description = json.loads(got["llm_models"][0][2])
    assert description["device"] == "cpu" and description["batch_size"] == 3


def test_llm_texts_on_ray_survives_a_killed_actor(
    ray_cluster, tmp_path, tiny_lms, local_llm, monkeypatch
):
    """The first batch kills its actor (os._exit); Ray restarts it (the model is loaded
    again), the batch is drawn again and committed once."""
    import corpus_audit.stages.llm_texts as llm_module

    markers = kill_first_actor(monkeypatch, llm_module, "lm_spec", tmp_path)
    got, _ = _llm_tables(tmp_path / "s", tiny_lms, "ray")
    assert len(list(markers.iterdir())) == 1  # an actor did die on its first batch
    assert got == local_llm


def test_llm_texts_api_model_runs_on_the_ray_engine(ray_cluster, tmp_path):
    """An ``openai:`` model is a worker of the run's engine (its load opens the client
    session), like every model: the run records the Ray engine, the tables are complete."""
    from corpus_audit.backends.fakes.chat_server import ChatServer

    def respond(prompt: str, n: int, seed: int | None, model: str) -> list[str]:
        return [f"She is a cook; her kitchen {seed} {k}." for k in range(n)]

    with ChatServer(respond) as server:
        tables, run = _llm_tables(
            tmp_path / "s", ["openai:m"], "ray", api_base=server.url, api_key_env=""
        )
    # the specified pairs done in one round, the unspecified ones (no man) capped at 6 texts
    assert len(tables["llm_texts"]) == 2 * 2 + 2 * 6
    assert run.provenance["engine"]["engine"] == "ray"
