"""The generate stage with a tiny random-weight Stable Diffusion pipeline built offline.

The pipeline is a real ``StableDiffusionPipeline`` (UNet2DConditionModel, AutoencoderKL,
CLIPTextModel, the real CLIP BPE tokenizer from open_clip's vocabulary, PNDM scheduler) with
random weights and tiny sizes (32x32 pixels, 2 steps), saved once per session and loaded by
the stage from its directory exactly as a downloaded model would be. Captions are real LAION
captions from ../shared/data.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from corpus_audit.backends.fakes.diffusion import (
    clip_tokenizer,
    random_sd_pipeline,
    write_clip_tokenizer_files,
)
from corpus_audit.backends.generators import (
    DiffusersGenerator,
    GenerationSettings,
    derive_seed,
    model_slug,
)
from corpus_audit.core.errors import ModelError, StageOrderError
from corpus_audit.methods.lexicon import (
    load_occupations,
    load_prompt_set,
    pick_occupations,
    render_prompts,
)
from corpus_audit.stages.generate import generate, plan_jobs, prompt_specs, regenerate_image

OCCUPATIONS = ("nurse", "scientist")
TINY = {"steps": 2, "height": 32, "width": 32}


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    return write_clip_tokenizer_files(tmp_path_factory.mktemp("clip_tokenizer"))


@pytest.fixture(scope="session")
def tiny_sd(tmp_path_factory, tokenizer_dir) -> Path:
    """A tiny random SD pipeline without safety checker, saved like a downloaded model."""
    path = tmp_path_factory.mktemp("models") / "tiny-sd"
    random_sd_pipeline("tiny", tokenizer_dir=tokenizer_dir).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_sd_checker(tmp_path_factory, tokenizer_dir) -> Path:
    """The same with a random safety checker whose thresholds flag every image as NSFW."""
    import torch

    pipe = random_sd_pipeline("tiny", tokenizer_dir=tokenizer_dir, safety_checker=True)
    with torch.no_grad():  # cosine similarity - threshold > 0 for every concept: all flagged
        pipe.safety_checker.concept_embeds_weights.fill_(-2.0)
    path = tmp_path_factory.mktemp("models") / "tiny-sd-checker"
    pipe.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_generator(tiny_sd) -> DiffusersGenerator:
    return DiffusersGenerator(str(tiny_sd), GenerationSettings(device="cpu", **TINY))


def _captions(laion_path: Path, forms: tuple[str, ...], n: int) -> list[tuple[int, str]]:
    """The ``n`` longest real LAION captions naming one of ``forms`` (row number, text)."""
    import duckdb

    pattern = r"\b(" + "|".join(re.escape(f) for f in forms) + r")\b"
    rows = (
        duckdb.connect()
        .execute(
            "SELECT row_number() OVER () - 1 AS row, TEXT FROM read_parquet(?)", [str(laion_path)]
        )
        .fetchall()
    )
    hits = [(r, t) for r, t in rows if t and re.search(pattern, t.lower())]
    return sorted(hits, key=lambda rt: (-len(rt[1]), rt[0]))[:n]


def fill_tables(study, laion_path: Path, *, templates=(1, 2), per_occupation=3) -> dict:
    """Write what `select` would: prompts, captions, keyword + no_indicators samples."""
    occupations = pick_occupations(load_occupations(), list(OCCUPATIONS))
    prompts = [
        p for p in render_prompts(load_prompt_set(), occupations) if p["template_id"] in templates
    ]
    con = study.con
    con.executemany(
        "INSERT INTO prompts VALUES (?, ?, ?, ?, ?)",
        [
            (p["prompt_id"], p["prompt_set"], p["template_id"], p["occupation"], p["text"])
            for p in prompts
        ],
    )
    samples: dict[str, list[int]] = {}
    texts: dict[int, str] = {}
    for occ in occupations:
        picked = _captions(laion_path, occ.forms, per_occupation)
        for rank, (row, text) in enumerate(picked, start=1):
            texts[row] = text
            con.execute(
                "INSERT INTO captions VALUES (?, ?, NULL, ?, ?) ON CONFLICT DO NOTHING",
                [row, text, str(laion_path), row],
            )
            con.execute(
                "INSERT INTO samples VALUES ('keyword', ?, NULL, ?, ?, NULL)", [occ.name, row, rank]
            )
            if rank == 1:  # a subset also in no_indicators: must not be generated twice
                con.execute(
                    "INSERT INTO samples VALUES ('no_indicators', ?, NULL, ?, 1, NULL)",
                    [occ.name, row],
                )
            samples.setdefault(occ.name, []).append(row)
    return {"prompts": prompts, "samples": samples, "texts": texts}


@pytest.fixture
def gen_study(make_study, laion_path, tiny_sd):
    """A study over real LAION captions with 2 occupations x 2 templates, 3 images each."""
    study = make_study(
        [laion_path],
        generate={"models": [str(tiny_sd)], "images_per_prompt": 3, "batch_size": 4, **TINY},
        engine={"device": "cpu"},
    )
    study.tables = fill_tables(study, laion_path)
    return study


def _rows(study, where="TRUE"):
    cur = study.con.execute(f"SELECT * FROM images WHERE source = 'generated' AND {where}")
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _pixels(study, rel_path: str) -> np.ndarray:
    with Image.open(study.root / rel_path) as im:
        return np.asarray(im.convert("RGB"))


# -- pure functions -------------------------------------------------------------------------
def test_seed_rule_is_stable_and_separates_inputs():
    a = derive_seed(0, "CompVis/stable-diffusion-v1-4", "paper:1:nurse", 0)
    assert a == derive_seed(0, "CompVis/stable-diffusion-v1-4", "paper:1:nurse", 0)
    others = {
        derive_seed(1, "CompVis/stable-diffusion-v1-4", "paper:1:nurse", 0),
        derive_seed(0, "stable-diffusion-v1-5/stable-diffusion-v1-5", "paper:1:nurse", 0),
        derive_seed(0, "CompVis/stable-diffusion-v1-4", "paper:2:nurse", 0),
        derive_seed(0, "CompVis/stable-diffusion-v1-4", "paper:1:nurse", 1),
    }
    assert a not in others and len(others) == 4
    assert all(0 <= s < 2**63 for s in others | {a})


def test_model_slug():
    assert model_slug("CompVis/stable-diffusion-v1-4") == "compvis--stable-diffusion-v1-4"
    local = model_slug("/models/My SD")
    assert re.fullmatch(r"my-sd-[0-9a-f]{8}", local)
    assert local != model_slug("/other/My SD")


def test_config_rejects_bad_generation_values(tmp_path):
    from corpus_audit.core.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError, match="generate.height"):
        config_from_dict({"generate": {"height": 500}}, tmp_path)
    with pytest.raises(ConfigError, match="generate.nsfw_policy"):
        config_from_dict({"generate": {"nsfw_policy": "drop"}}, tmp_path)


# -- the generator --------------------------------------------------------------------------
def test_same_seed_gives_identical_image(tiny_generator):
    prompt = "A photo of the face of a nurse"
    first = tiny_generator.generate([prompt], [1234])[0].pixels
    again = tiny_generator.generate([prompt], [1234])[0].pixels
    other = tiny_generator.generate([prompt], [1235])[0].pixels
    assert first.shape == (32, 32, 3) and first.dtype == np.uint8
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    # In a batch with other prompts the image comes from the same noise: equal up to rounding.
    batch = tiny_generator.generate(["a scientist", prompt, "an engineer"], [7, 1234, 8])
    assert np.abs(batch[1].pixels.astype(int) - first.astype(int)).max() <= 1
    assert tiny_generator.generate([prompt], [1234])[0].nsfw is None  # no safety checker


def test_generator_records_scheduler_and_sdpa(tiny_generator):
    info = tiny_generator.describe()
    assert info["scheduler"] == "PNDMScheduler"
    assert info["attention"] == ["AttnProcessor2_0"]
    assert info["dtype"] == "float32" and info["device"] == "cpu"
    assert tiny_generator.max_prompt_tokens == 77


def test_unknown_scheduler_is_a_clear_error(tiny_sd):
    with pytest.raises(ModelError, match="NoSuchScheduler.*compatible with.*DDIMScheduler"):
        DiffusersGenerator(
            str(tiny_sd), GenerationSettings(device="cpu", scheduler="NoSuchScheduler", **TINY)
        )


def test_tokenizer_is_the_real_clip_bpe(tokenizer_dir):
    tok = clip_tokenizer(tokenizer_dir)
    # ids of openai/clip-vit-large-patch14's tokenizer for this text
    assert tok("A photo of an engineer").input_ids == [49406, 320, 1125, 539, 550, 8517, 49407]


# -- the stage ------------------------------------------------------------------------------
def test_stage_writes_n_images_per_prompt_with_recorded_seeds(gen_study, tiny_sd):
    run = generate(gen_study, progress=False)
    assert not run.skipped
    rows = _rows(gen_study)
    assert len(rows) == run.rows_out == run.rows_in == 4 * 3
    per_prompt = Counter(r["prompt_id"] for r in rows)
    assert set(per_prompt.values()) == {3}
    model = str(tiny_sd)
    for r in rows:
        jobs = {
            j.seed: j
            for j in plan_jobs(0, model, prompt_specs(gen_study))
            if j.spec.key == r["prompt_id"]
        }
        assert r["seed"] in jobs and r["model_id"] == model and r["nsfw"] is None
        prompt = next(p for p in gen_study.tables["prompts"] if p["prompt_id"] == r["prompt_id"])
        assert r["prompt_text"] == prompt["text"] and r["occupation"] == prompt["occupation"]
        assert r["path"].startswith(f"images/generated/{model_slug(model)}/prompts/")
        assert _pixels(gen_study, r["path"]).shape == (32, 32, 3)
    settings = gen_study.con.execute(
        "SELECT scheduler, steps, height, dtype FROM generation_settings"
    ).fetchall()
    assert settings == [("PNDMScheduler", 2, 32, "float32")]
    assert run.provenance["models"][model]["scheduler"] == "PNDMScheduler"
    assert "seed_rule" in run.provenance

    mtimes = {r["path"]: (gen_study.root / r["path"]).stat().st_mtime_ns for r in rows}
    again = generate(gen_study, progress=False)
    assert again.skipped and again.rows_out == 0
    assert len(_rows(gen_study)) == 12
    assert mtimes == {p: (gen_study.root / p).stat().st_mtime_ns for p in mtimes}

    # Another study seed is another plan: new images, the old ones reported, not deleted.
    gen_study.config.study.seed = 1
    gen_study.config.generate.images_per_prompt = 1
    other = generate(gen_study, progress=False)
    assert other.rows_out == 4 and len(_rows(gen_study)) == 16
    assert other.provenance["images_not_in_plan"] == {model: 12}
    assert any("not in the current plan" in m for m in other.messages)


def test_regenerate_one_image_exactly(gen_study):
    generate(gen_study, progress=False)
    for row in _rows(gen_study)[3:6]:  # batches of 4: replayed whole, bit for bit
        stored = _pixels(gen_study, row["path"])
        assert np.array_equal(regenerate_image(gen_study, row["image_id"]).pixels, stored)
        alone = regenerate_image(gen_study, row["image_id"], exact=False).pixels
        assert np.abs(alone.astype(int) - stored.astype(int)).max() <= 2
    with pytest.raises(StageOrderError, match="no generated image"):
        regenerate_image(gen_study, "gen:nothing")


def test_regenerate_command_writes_the_identical_image(gen_study, tmp_path, capsys):
    from corpus_audit.cli import main

    generate(gen_study, progress=False)
    row = _rows(gen_study)[5]
    gen_study.close()  # the command opens the study itself
    out = tmp_path / "again.png"
    assert main(["regenerate", str(gen_study.root), row["image_id"], "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"{out}: identical to the stored image"
    with Image.open(out) as im:
        assert np.array_equal(np.asarray(im.convert("RGB")), _pixels(gen_study, row["path"]))
    assert main(["regenerate", str(gen_study.root), "gen:nothing"]) == 2
    assert "no generated image 'gen:nothing'" in capsys.readouterr().err
    assert main(["regenerate", str(gen_study.root), row["image_id"]]) == 0  # default path
    default = gen_study.root / "regenerated"
    assert [p.suffix for p in default.iterdir()] == [".png"]


def test_killed_run_resumes_without_generating_twice(gen_study, monkeypatch):
    import corpus_audit.stages.generate as stage

    made: list[int] = []
    original = DiffusersGenerator.generate

    def counting(self, prompts, seeds):
        made.extend(seeds)
        if limit is not None and len(made) > limit:
            raise RuntimeError("simulated kill")
        return original(self, prompts, seeds)

    monkeypatch.setattr(DiffusersGenerator, "generate", counting)
    limit = 5  # batches of 4: the 2nd batch dies in flight
    with pytest.raises(RuntimeError, match="simulated kill"):
        generate(gen_study, progress=False)
    assert len(_rows(gen_study)) == 4
    assert gen_study.last_run("generate") is None  # an unfinished run is not recorded

    # A kill between the files and the rows: files without rows are made again.
    real_insert = stage._insert_rows

    def dying_insert(*args, **kwargs):
        raise RuntimeError("killed after writing files")

    limit = None
    made.clear()
    monkeypatch.setattr(stage, "_insert_rows", dying_insert)
    with pytest.raises(RuntimeError, match="after writing files"):
        generate(gen_study, progress=False)
    # The first new batch's files were written before its rows failed: 4 files without rows
    # (the driver writes a batch's files, then its rows, then the next batch's files)
    orphans = sorted(p for p in (gen_study.root / "images").rglob("*.png"))
    assert len(orphans) == 8 and len(_rows(gen_study)) == 4
    orphan_pixels = {p: np.asarray(Image.open(p).convert("RGB")) for p in orphans}

    monkeypatch.setattr(stage, "_insert_rows", real_insert)
    made.clear()
    run = generate(gen_study, progress=False)
    assert run.rows_out == 8 and len(made) == 8  # only the missing ones
    rows = _rows(gen_study)
    assert len(rows) == 12 and len({r["image_id"] for r in rows}) == 12
    for prompt_id, n in Counter(r["prompt_id"] for r in rows).items():
        seeds = {r["seed"] for r in rows if r["prompt_id"] == prompt_id}
        assert n == 3 and len(seeds) == 3
    hashes = {_pixels(gen_study, r["path"]).tobytes() for r in rows}
    assert len(hashes) == 12  # 12 distinct images
    for path, pixels in orphan_pixels.items():  # the regenerated files are the same images
        assert np.array_equal(np.asarray(Image.open(path).convert("RGB")), pixels)
    assert len(list((gen_study.root / "images").rglob("*.png"))) == 12
    assert not list((gen_study.root / "images").rglob("*.tmp"))


def test_captions_as_prompts_link_every_image_to_its_caption(make_study, laion_path, tiny_sd):
    study = make_study(
        [laion_path],
        generate={"models": [str(tiny_sd)], "images_per_prompt": 1, "images_per_caption": 2,
                  "captions_as_prompts": ["keyword", "no_indicators"], "batch_size": 4, "caption_prompts": "all",
                  **TINY},
        engine={"device": "cpu"},
        select={"sample_unit": "captions"},  # no training images: the first N captions
    )  # fmt: skip
    tables = fill_tables(study, laion_path, templates=(1,), per_occupation=2)
    with pytest.warns(UserWarning, match="truncated"):
        run = generate(study, progress=False)
    caption_rows = _rows(study, "caption_id IS NOT NULL")
    texts = tables["texts"]
    assert len(caption_rows) == 2 * len(texts)  # no_indicators captions are not made twice
    per_caption = Counter(r["caption_id"] for r in caption_rows)
    assert set(per_caption) == set(texts) and set(per_caption.values()) == {2}
    for r in caption_rows:
        assert r["prompt_text"] == texts[r["caption_id"]]
        assert r["prompt_id"] is None and r["strategy"] == "keyword"
        assert r["caption_id"] in tables["samples"][r["occupation"]]
        assert "/captions/" in r["path"] and (study.root / r["path"]).is_file()
    assert len(_rows(study, "prompt_id IS NOT NULL")) == 2
    # The analysis join lists every subset an image belongs to.
    from corpus_audit.core.store import sql_text

    members = study.con.execute(sql_text("generate/caption_images.sql")).fetchall()
    assert {m[3] for m in members} == {"keyword", "no_indicators"}
    assert run.provenance["prompts"] == {"prompt": 2, "caption": len(texts), "paraphrase": 0}


def test_long_caption_is_truncated_with_a_recorded_warning(make_study, laion_path, tiny_sd):
    study = make_study(
        [laion_path],
        generate={"models": [str(tiny_sd)], "images_per_prompt": 1, "images_per_caption": 1,
                  "captions_as_prompts": ["keyword"], "caption_prompts": "all",
                  **TINY},
        engine={"device": "cpu"},
        select={"sample_unit": "captions"},  # no training images: the first N captions
    )  # fmt: skip
    fill_tables(study, laion_path, templates=(1,), per_occupation=1)
    with pytest.warns(UserWarning, match="1 prompt\\(s\\) longer than the text encoder's context"):
        run = generate(study, progress=False)
    model = str(tiny_sd)
    assert run.provenance["truncated_prompts"] == {model: 1}
    assert any("truncated" in m for m in run.messages)
    long_rows = study.con.execute(
        "SELECT i.prompt_text, g.n_tokens FROM generated_images g JOIN images i USING (image_id) "
        "WHERE g.truncated"
    ).fetchall()
    assert len(long_rows) == 1
    text, n_tokens = long_rows[0]
    assert n_tokens > 77 and text.startswith("Lightning research. Scientists prepare a rocket")
    assert study.count("generated_images", "NOT truncated") == 3  # 2 prompts + the nurse caption
    assert run.summary[0]["truncated_prompts"] == 1
    import warnings

    with warnings.catch_warnings():  # a rerun generates nothing: no new warning, same record
        warnings.simplefilter("error")
        again = generate(study, progress=False)
    assert again.skipped and again.provenance["truncated_prompts"] == {model: 1}


def test_unknown_model_offline_is_a_clear_error(gen_study, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    gen_study.config.generate.models = ["no-such-org/no-such-diffusion-model"]
    with pytest.raises(ModelError, match=r"no-such-org/no-such-diffusion-model: .*offline"):
        generate(gen_study, progress=False)
    assert gen_study.count("images") == 0
    assert gen_study.last_run("generate") is None
    with pytest.raises(ModelError, match="no such text-to-image model directory"):
        DiffusersGenerator("/no/such/dir/model", GenerationSettings(device="cpu"))


def test_no_models_is_skipped_with_a_message(make_study, laion_path):
    study = make_study([laion_path])
    run = generate(study, progress=False)
    assert run.skipped and "generate.models is empty" in run.messages[0]
    assert study.last_run("generate")["status"] == "skipped"


def test_no_prompts_is_a_stage_order_error(make_study, laion_path, tiny_sd):
    study = make_study([laion_path], generate={"models": [str(tiny_sd)], **TINY})
    with pytest.raises(StageOrderError, match="select"):
        generate(study, progress=False)
    study.config.generate.captions_as_prompts = ["nn"]
    with pytest.raises(StageOrderError, match="strategy 'nn'"):
        generate(study, progress=False)


@pytest.mark.parametrize("policy", ["blackout", "keep"])
def test_nsfw_flag_is_recorded_never_dropped(make_study, laion_path, tiny_sd_checker, policy):
    study = make_study(
        [laion_path],
        generate={"models": [str(tiny_sd_checker)], "images_per_prompt": 2, "nsfw_policy": policy,
                  **TINY},
        engine={"device": "cpu"},
    )  # fmt: skip
    fill_tables(study, laion_path, templates=(1,), per_occupation=1)
    run = generate(study, progress=False)
    rows = _rows(study)
    assert len(rows) == 4 and all(r["nsfw"] is True for r in rows)
    assert run.summary[0]["nsfw"] == 4
    black = [not _pixels(study, r["path"]).any() for r in rows]
    assert all(black) if policy == "blackout" else not any(black)


def test_two_models_side_by_side_and_ddim(make_study, laion_path, tiny_sd, tmp_path):
    import shutil

    copy = tmp_path / "tiny-sd-copy"
    shutil.copytree(tiny_sd, copy)
    study = make_study(
        [laion_path],
        generate={"models": [str(tiny_sd), str(copy)], "images_per_prompt": 2,
                  "scheduler": "DDIMScheduler", **TINY},
        engine={"device": "cpu"},
    )  # fmt: skip
    fill_tables(study, laion_path, templates=(1,), per_occupation=1)
    run = generate(study, progress=False)
    per_model = Counter(r["model_id"] for r in _rows(study))
    assert per_model == {str(tiny_sd): 4, str(copy): 4}
    assert len(run.summary) == 2
    schedulers = study.con.execute("SELECT DISTINCT scheduler FROM generation_settings").fetchall()
    assert schedulers == [("DDIMScheduler",)]
    seeds = {m: {r["seed"] for r in _rows(study) if r["model_id"] == m} for m in per_model}
    assert seeds[str(tiny_sd)].isdisjoint(seeds[str(copy)])  # the seed depends on the model


def test_half_precision_path_keeps_seeds_and_flags(tiny_sd_checker):
    # bfloat16 runs on CPU too: the same conversion path as float16 on a GPU, checker included.
    gen = DiffusersGenerator(
        str(tiny_sd_checker), GenerationSettings(device="cpu", dtype="bfloat16", **TINY)
    )
    assert gen.describe()["dtype"] == "bfloat16"
    first, other = gen.generate(["A photo of a nurse smiling", "a scientist"], [3, 4])
    again = gen.generate(["A photo of a nurse smiling", "a scientist"], [3, 4])[0]
    assert first.nsfw is True and first.pixels.shape == (32, 32, 3)
    assert np.array_equal(first.pixels, again.pixels) and not first.pixels.any()  # blacked out
