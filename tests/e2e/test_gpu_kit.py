"""The GPU kit (benchmarks/gpu, docs/gpu.md) cannot rot: every part runs end to end on this
CPU at tiny sizes (``run.sh all --dry``, no GPU, no downloaded wheels) and writes the JSON
fields docs/gpu.md's results come from; the payload check refuses an oversized call; the
calls in docs/gpu.md are the kit's; every CUDA-dependent test is in the check part's list."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "benchmarks" / "gpu"
RUN = KIT / "run.sh"


def _module(name: str):
    """A kit module by file (benchmarks/gpu is not a package; its modules import ``common``)."""
    if str(KIT) not in sys.path:
        sys.path.insert(0, str(KIT))
    spec = importlib.util.spec_from_file_location(f"gpukit_{name}", KIT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _run(args: list[str], out: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env["PY"] = sys.executable
    return subprocess.run(
        ["bash", str(RUN), *args, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def dry(tmp_path_factory) -> dict[str, dict]:
    """Every part's JSON of one ``run.sh all --dry`` (one process, under a minute here)."""
    out = tmp_path_factory.mktemp("gpukit")
    proc = _run(["all", "--dry"], out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / "run-all-dry.log").read_text().count("ok in") == 5
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}


def test_every_part_runs_dry_and_records_its_run(dry):
    common = _module("common")
    assert sorted(dry) == sorted(common.PARTS)
    for part, record in dry.items():
        assert record["status"] == "ok", (part, record.get("error"))
        assert record["dry"] is True and record["device"] == "cpu" and record["gpu"] is None
        assert record["versions"]["torch"] and record["versions"]["python"]
        assert record["wall_s"] > 0


def test_generate_dry_results(dry):
    r = dry["generate"]["results"]
    assert r["plain"]["path"] == "plain diffusers" and r["plain"]["dtype"] == "float32"
    assert [row["batch"] for row in r["sweep"]] == [1, 2]
    assert all(row["s_per_image"] > 0 and row["images_per_s"] > 0 for row in r["sweep"])
    assert r["sweep"][0]["attention"] == ["AttnProcessor2_0"]
    assert r["bfloat16"]["dtype"] == "bfloat16" and r["bfloat16"]["s_per_image"] > 0
    assert r["compiled"]["s_per_image"] > 0 and r["compiled"]["compiled"] is False  # CUDA only
    assert r["checks"]["same_seed_bit_identical_batch1"] is True
    assert r["checks"]["same_seeds_bit_identical_batch"] is True
    assert r["checks"]["nsfw_flag_recorded"] is True
    s = r["summary"]
    assert s["plan_images"] == 248_000 and s["plan_gpu_hours_paper_rate"] == 241.1
    assert s["plan_gpu_hours"] == round(248_000 * s["best_s_per_image"] / 3600, 1)
    assert s["goal_met"] is None  # a dry run meets no goal


def test_clip_dry_results(dry):
    r = dry["clip"]["results"]
    assert r["files"]["n"] == 12 and "grace" in r["files"]["photos"]
    assert (
        r["forward"]["batched_images_per_s"] > 0 and r["forward"]["one_per_call_images_per_s"] > 0
    )
    e2e = r["end_to_end"]
    assert e2e["pipelined_images_per_s"] > 0 and e2e["one_file_per_call_images_per_s"] > 0
    assert e2e["batched_equals_one_by_one_atol_1e-2"] is True
    cmp = r["fp16_vs_fp32"]
    assert (
        cmp["images"] == 12 and cmp["ok"] is True and cmp["labels_differ_not_near_threshold"] == 0
    )
    assert sum(cmp["label_counts_fp32"].values()) == 12


def test_embed_dry_results(dry):
    r = dry["embed"]["results"]
    e = r["embed"]
    assert e["captions"] == 64 and e["ours_captions_per_s"] > 0 and e["plain_captions_per_s"] > 0
    assert e["min_cosine_ours_vs_plain"] > 0.99
    s = r["search"]
    assert (s["n"], s["queries"], s["k"], s["dim"]) == (4000, 8, 50, 384)
    assert s["cpu_numpy_s"] > 0 and s["cpu_torch_s"] > 0
    assert s["recall_vs_numpy"] == 1.0


def test_llm_dry_results(dry):
    r = dry["llm"]["results"]
    assert [row["batch"] for row in r["rows"]] == [1, 4]
    for row in r["rows"]:
        assert 0 < row["new_tokens"] <= row["requests"] * r["config"]["max_tokens"]
        assert row["tokens_per_s"] > 0
    assert r["summary"]["one_prompt_tokens_per_s"] == r["rows"][0]["tokens_per_s"]


def test_check_dry_collects_every_listed_test(dry):
    got = dry["check"]["results"]["collected"]
    assert got["rc"] == 0 and got["collected"] >= got["listed"] >= 5


def test_every_cuda_dependent_test_is_in_the_check_part():
    listed = {line.split("::")[0] for line in _module("part_check").listed()}
    needle = "cuda." + "is_available"  # spelt apart so this file does not match itself
    uses = {
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("test_*.py")
        if p.name != Path(__file__).name and needle in p.read_text(encoding="utf-8")
    }
    assert uses and uses <= listed, f"add to benchmarks/gpu/cuda_tests.txt: {uses - listed}"


def test_an_unknown_part_is_a_one_line_error(tmp_path):
    proc = _run(["nope", "--dry"], tmp_path, timeout=60)
    assert proc.returncode != 0
    assert (
        "error: unknown part 'nope' (parts: generate, clip, embed, llm, check, all)" in proc.stdout
    )


def _fake_wheels(kit, whl: Path, big: str | None = None) -> None:
    """Empty files named as the pinned wheels in ``whl/all`` (``big``'s one 61 MiB, sparse)."""
    (whl / "all").mkdir(parents=True)
    for pin in kit.read_pins():
        path = whl / "all" / f"{kit.normalize(pin.name)}-{pin.version}-py3-none-any.whl"
        path.write_bytes(b"x")
        if pin.name == big:
            with open(path, "r+b") as fh:
                fh.truncate(61 * kit.MIB)


def test_payload_sizes_and_refusal(tmp_path, capsys):
    kit = _module("kit")
    tree = kit.tree_bytes()
    assert 0 < tree < 20 * kit.MIB
    _fake_wheels(kit, tmp_path / "ok")
    sizes = kit.payloads(kit.link_parts(kit.read_pins(), tmp_path / "ok"), tree)
    assert kit.report(sizes, 60) == []
    assert sizes["generate"]["carry"] == [".whl/generate"] and sizes["embed"]["carry"] == []
    assert sizes["clip,embed"]["wheels"] == sizes["clip"]["wheels"]
    _fake_wheels(kit, tmp_path / "big", big="diffusers")
    sizes = kit.payloads(kit.link_parts(kit.read_pins(), tmp_path / "big"), tree)
    assert kit.report(sizes, 60) == ["generate"]
    assert "OVER 60 MiB" in capsys.readouterr().out
    # a stale wheel left in a part's folder is removed
    assert sorted(p.name for p in (tmp_path / "big" / "embed").iterdir()) == []


def test_wheel_tags_and_pins_are_checked(tmp_path):
    kit = _module("kit")
    assert kit.compatible(Path("diffusers-0.38.0-py3-none-any.whl"))
    assert kit.compatible(Path("scikit_image-0.26.0-cp312-cp312-manylinux_2_28_x86_64.whl"))
    assert kit.compatible(Path("wcwidth-0.9.4-cp310-abi3-manylinux2014_x86_64.whl"))
    assert not kit.compatible(Path("scikit_image-0.26.0-cp311-cp311-manylinux_2_28_x86_64.whl"))
    assert not kit.compatible(Path("torch-2.11.0-cp312-cp312-macosx_11_0_arm64.whl"))
    bad = tmp_path / "wheels.txt"
    bad.write_text("diffusers>=0.38 generate\n")
    with pytest.raises(SystemExit, match=r"wheels.txt:1: expected 'name==version part"):
        kit.read_pins(bad)
    bad.write_text("diffusers==0.38.0 nowhere\n")
    with pytest.raises(SystemExit, match=r"wheels.txt:1"):
        kit.read_pins(bad)


def test_docs_checklist_holds_the_kits_calls():
    common, kit = _module("common"), _module("kit")
    with_wheels = {part for pin in kit.read_pins() for part in pin.parts}
    text = (REPO / "docs" / "gpu.md").read_text(encoding="utf-8")
    head = "\n".join(text.splitlines()[:40])
    for call in common.CALLS:
        carry = [f".whl/{p}" for p in call.split(",") if p in with_wheels]
        line = (
            f'run(command="bash benchmarks/gpu/run.sh {call}", '
            f"carry={json.dumps(carry)}, timeout_s={common.call_timeout(call)})"
        )
        assert line in head, f"docs/gpu.md's checklist lacks: {line}"
    assert "make gpu-kit" in head and "benchmarks/out/gpu/" in text
