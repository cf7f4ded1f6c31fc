"""CLIP image-image similarity of training vs generated images (issue 10, item 5).

The study is the analysis fixture of `study_builder` (real LAION/COCO captions, real photos of
people from scikit-image and matplotlib as image files, labels set per occupation) with the
configured CLIP model a tiny random-weight open_clip architecture (no CLIP weights are
reachable offline). The expected cosines are computed here with open_clip directly: a fresh
model carrying the same weights, each image encoded on its own, and the mean over every
(training, generated) pair taken pair by pair.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from image_fixtures import tiny_clip_dir
from study_builder import build

from corpus_audit.core.pipeline import init_study
from corpus_audit.stages.analyze import analyze

pytestmark = pytest.mark.filterwarnings("ignore:clip classifier .*random:UserWarning")
SEED = 0


@pytest.fixture(scope="module")
def study(tmp_path_factory, shared_data):
    root = tmp_path_factory.mktemp("imgsim")
    folder = tiny_clip_dir(root / "tinyclip")
    corpus = [
        shared_data / "laion400m_sample_10k.parquet",
        shared_data / "coco_val2017_captions.parquet",
    ]
    s = init_study(
        root / "study",
        [str(corpus[0])],
        overrides={
            "analysis": {"bootstrap": 20, "image_similarity": "auto"},
            "label": {
                "classifier": "clip",
                "clip_model": f"local-dir:{folder}",
                "clip_pretrained": "random",
                "batch_size": 4,
            },
            "neighbors": {"cache_dir": str(root / "cache")},
            "engine": {"device": "cpu"},
            "study": {"seed": SEED},
        },
    )
    build(s, corpus)
    s.first = analyze(s, progress=False)
    s.clip_dir = folder
    yield s
    s.close()


def _reference_vectors(study, paths: list[str]) -> dict[str, np.ndarray]:
    """Each image encoded alone by a fresh open_clip model holding the same random weights."""
    import open_clip
    import torch
    from PIL import Image

    from corpus_audit.backends.classifiers import ClipClassifier

    weights = ClipClassifier(
        f"local-dir:{study.clip_dir}", "random", device="cpu", seed=SEED
    ).state_dict()
    net, _, preprocess = open_clip.create_model_and_transforms(
        f"local-dir:{study.clip_dir}", pretrained=None, load_weights=False
    )
    net.load_state_dict(weights)
    net.eval()
    out = {}
    for p in paths:
        with Image.open(study.root / p) as im:
            x = preprocess(im.convert("RGB")).unsqueeze(0)
        with torch.no_grad():
            v = net.encode_image(x)[0].double().numpy()
        out[p] = v / np.linalg.norm(v)
    return out


def test_mean_cosine_equals_the_pairwise_mean(study):
    rows = study.con.execute(
        "SELECT model_id, strategy, occupation, template_id, prompt_id, n_training, "
        "n_generated, mean_cosine, clip_model FROM image_similarity ORDER BY ALL"
    ).fetchall()
    assert rows
    training = {}
    for strategy, occ, pid, path in study.con.execute(
        "SELECT t.strategy, t.occupation, t.prompt_id, i.path FROM training_subsets t "
        "JOIN images i USING (image_id) WHERE t.label IN ('female', 'male')"
    ).fetchall():
        training.setdefault((strategy, occ, pid), []).append(path)
    generated = {}
    for model, pid, path in study.con.execute(
        "SELECT i.model_id, i.prompt_id, i.path FROM images i JOIN labels l USING (image_id) "
        "JOIN face_filter f USING (image_id) WHERE i.source = 'generated' "
        "AND i.prompt_id IS NOT NULL AND f.kept AND l.label IN ('female', 'male')"
    ).fetchall():
        generated.setdefault((model, pid), []).append(path)
    vec = _reference_vectors(
        study, sorted({p for v in [*training.values(), *generated.values()] for p in v})
    )
    prompt_of = dict(study.con.execute("SELECT prompt_id, template_id FROM prompts").fetchall())
    checked = 0
    for model, strategy, occ, template, pid, n_t, n_g, mean, clip_model in rows:
        assert clip_model.startswith("clip:local-dir:") and clip_model.endswith("/random")
        assert prompt_of[pid] == template
        t_paths = training.get((strategy, occ, None)) or training[(strategy, occ, pid)]
        g_paths = generated[(model, pid)]
        assert (n_t, n_g) == (len(t_paths), len(g_paths))
        pairs = [float(vec[a] @ vec[b]) for a in t_paths for b in g_paths]
        assert mean == pytest.approx(sum(pairs) / len(pairs), abs=2e-4)
        checked += 1
    strategies = {r[1] for r in rows}
    assert {"keyword", "nn"} <= strategies and checked >= 40
    messages = " ".join(study.first.messages)
    assert "CLIP image-image similarity, training vs generated (sd-tiny-a): keyword" in messages
    assert "% vs keyword" in messages


def test_rerun_takes_embeddings_from_the_cache(study):
    first = study.first.provenance["image_similarity"]
    assert first["embedded"] > 0 and first["images"] >= first["embedded"]
    before = study.con.execute("SELECT * FROM image_similarity ORDER BY ALL").fetchall()
    study.config.analysis.bootstrap = 21  # another input fingerprint: the stage recomputes
    try:
        run = analyze(study, progress=False)
    finally:
        study.config.analysis.bootstrap = 20
    assert not run.skipped and run.provenance["image_similarity"]["embedded"] == 0
    assert study.con.execute("SELECT * FROM image_similarity ORDER BY ALL").fetchall() == before


def test_auto_is_off_for_another_classifier(study):
    study.config.label.classifier = "agegender"
    try:
        run = analyze(study, progress=False)
        assert "image_similarity" not in run.provenance
        assert study.count("image_similarity") == 0
    finally:
        study.config.label.classifier = "clip"
        analyze(study, progress=False)
    assert study.count("image_similarity") > 0


def test_report_shows_it_beside_the_caption_similarity(study):
    from corpus_audit.report import report

    run = report(study, progress=False)
    html = Path(run.outputs["report"]).read_text(encoding="utf-8")
    start = html.index('id="image-similarity"')
    table = html[start : html.index("</table>", start)]
    rows = study.con.execute(
        "SELECT model_id, strategy, mean_cosine FROM image_similarity"
    ).fetchall()
    means: dict[tuple[str, str], list[float]] = {}
    for model, strategy, cos in rows:
        means.setdefault((model, strategy), []).append(cos)
    for (model, strategy), values in means.items():
        assert f"{sum(values) / len(values):.3f}" in table, (model, strategy)
    base = {m: sum(v) / len(v) for (m, s), v in means.items() if s == "keyword"}
    for (model, strategy), values in means.items():
        if strategy != "nn":
            continue
        change = 100 * (sum(values) / len(values) - base[model]) / abs(base[model])
        assert f"{change:+.1f} %" in table
    assert "mean caption-prompt cosine" in table


def test_untrained_weights_are_flagged_in_analyze_and_the_report(study):
    from corpus_audit.report import report

    warning = next(m for m in study.first.messages if m.startswith("WARNING"))
    assert "untrained (random) model weights" in warning and "/random" in warning
    html = Path(report(study, progress=False).outputs["report"]).read_text(encoding="utf-8")
    start = html.index('id="untrained-banner"')
    banner = html[start : html.index("</div>", start)]
    assert "clip:local-dir:tinyclip/random" in banner and "meaningless" in banner
