"""What every part of the GPU kit shares: sizes, timing, the device, the results file.

A part is a function ``run(ctx) -> None`` that adds its measurements to ``ctx.results`` step
by step; :meth:`Context.save` rewrites ``<out>/<part>.json`` after every step, so a call cut
off by its time limit still returns the steps it finished.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

KIT = Path(__file__).resolve().parent
REPO = KIT.parents[1]
CONFIGS = KIT / "configs"

# The plan of the paradox paper (METHODS 1.3): 62 occupations x 4 prompts x 500 images x 2 models
PLAN_IMAGES = 62 * 4 * 500 * 2
PAPER_S_PER_IMAGE = 3.5  # its generation rate (SD on a TITAN RTX, 512x512, 50 steps)

# Goals of issue 36, checked in every part's JSON ("goal_met"); None when not measured.
GOALS = {
    "generate_s_per_image_max": 0.3,
    "clip_end_to_end_images_per_s_min": 1000.0,
    "embed_captions_per_s_min": 50_000.0,
    "search_s_max": 0.05,
}

# The versions the kit was written against (the accelerator machine's image, issue 36).
EXPECTED = {"torch": "2.11", "transformers": "5.17", "sentence-transformers": "6.0"}


def version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, None when absent."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """Versions of everything the kit relies on (recorded in every part's JSON)."""
    names = [
        "torch",
        "torchvision",
        "transformers",
        "sentence-transformers",
        "diffusers",
        "open_clip_torch",
        "huggingface-hub",
        "safetensors",
        "numpy",
        "pillow",
        "scikit-image",
        "pytest",
    ]
    found = {name: version(name) for name in names}
    found["python"] = platform.python_version()
    return found


def version_notes(found: dict[str, str | None]) -> list[str]:
    """One line per relied-on version that differs from :data:`EXPECTED` (informational)."""
    notes = []
    for name, want in EXPECTED.items():
        have = found.get(name)
        if have is None:
            notes.append(f"{name}: not installed (expected {want})")
        elif not (have == want or have.startswith(want + ".") or have.startswith(want + "+")):
            notes.append(f"{name}: {have} here, the kit was written for {want}")
    torch, vision = found.get("torch"), found.get("torchvision")
    if torch and vision:  # torchvision's compiled ops are built for one torch release
        pins = [r for r in metadata.requires("torchvision") or [] if r.startswith("torch ")]
        pins += [r for r in metadata.requires("torchvision") or [] if r.startswith("torch==")]
        wanted = [re.sub(r"[^0-9.]", "", r.split("==", 1)[1]) for r in pins if "==" in r]
        if wanted and torch.split("+")[0] != wanted[0]:
            notes.append(f"torchvision {vision} is built for torch {wanted[0]}, torch is {torch}")
    return notes


@dataclass
class Context:
    """One part's run: where results go, the device, and whether this is the tiny dry run."""

    part: str
    out: Path
    dry: bool
    device: str
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))
    results: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    record: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        found = versions()
        self.record = {
            "part": self.part,
            "dry": self.dry,
            "status": "running",
            "device": self.device,
            "gpu": gpu_name(self.device),
            "cpu_cores": self.cores,
            "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "versions": found,
            "version_notes": version_notes(found),
            "results": self.results,
        }
        self.save()

    @property
    def path(self) -> Path:
        return self.out / f"{self.part}.json"

    def save(self, status: str | None = None) -> None:
        """Write the part's JSON (atomically: a temporary file renamed over the old one)."""
        if status:
            self.record["status"] = status
        self.record["wall_s"] = round(time.perf_counter() - self.started, 2)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.record, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(self.path)

    def step(self, name: str, value: Any) -> Any:
        """Record one step's result, save, print one line; returns ``value``."""
        self.results[name] = value
        self.save()
        log(f"{self.part}.{name}: {json.dumps(value, default=str)[:400]}")
        return value

    def optional(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run and record a step whose failure must not cost the part (torch.compile needs a
        C compiler the machine may lack): on an exception record ``{"error": ...}``, return
        None."""
        try:
            return self.step(name, fn())
        except Exception as exc:
            traceback.print_exc()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self.step(name, {"error": f"{type(exc).__name__}: {first}"[:500]})
            return None

    def fail(self, exc: BaseException) -> None:
        """Record the error (one line + the traceback in the log) and mark the part failed."""
        self.record["error"] = (
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        )
        traceback.print_exc()
        self.save("error")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def gpu_name(device: str) -> str | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return torch.cuda.get_device_name(0)


def sync(device: str) -> None:
    """Wait for the device's queued work (CUDA kernels run asynchronously)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


@contextmanager
def timer(device: str) -> Iterator[dict[str, float]]:
    """``with timer(dev) as t: ...`` then ``t["s"]``: wall seconds, device work included."""
    got: dict[str, float] = {}
    sync(device)
    start = time.perf_counter()
    try:
        yield got
    finally:
        sync(device)
        got["s"] = time.perf_counter() - start


def best_of(device: str, repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``repeats`` (>= 1) timed calls of ``fn``: (seconds, its last result)."""
    best = float("inf")
    value = None
    for _ in range(max(1, repeats)):
        with timer(device) as t:
            value = fn()
        best = min(best, t["s"])
    return best, value


def rate(n: float, seconds: float) -> float:
    """Items per second (0 when nothing was timed)."""
    return round(n / seconds, 2) if seconds > 0 else 0.0


def peak_gib(device: str) -> float | None:
    """Peak GPU memory allocated since the last reset, GiB (None on CPU)."""
    if not device.startswith("cuda"):
        return None
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats()


def free(device: str) -> None:
    """Release cached GPU memory between steps."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Part:
    """One device call: its module, the modules it imports, the call's limit in seconds."""

    name: str
    module: str
    needs: tuple[str, ...]
    timeout_s: int
    what: str


PARTS = {
    p.name: p
    for p in (
        Part(
            "generate",
            "part_generate",
            ("diffusers", "open_clip"),
            480,
            "SD 1.5 generation: plain diffusers fp32 vs corpus_audit (fp16/bf16, batches, "
            "compile); bit-identical seeds; plan GPU-hours",
        ),
        Part(
            "clip",
            "part_clip",
            ("open_clip", "torchvision"),
            240,
            "CLIP ViT-L/14 labelling: forward and end to end over photo files; fp16 vs fp32 labels",
        ),
        Part(
            "embed",
            "part_embed",
            ("sentence_transformers",),
            180,
            "MiniLM caption embeddings vs plain encode; exact top-500 search 1 M x 384 GPU vs CPU",
        ),
        Part(
            "llm",
            "part_llm",
            ("transformers",),
            240,
            "1.1 B Llama text generation: tokens/s batched vs one prompt",
        ),
        Part(
            "check",
            "part_check",
            ("pytest", "open_clip", "skimage"),
            180,
            "the project's CUDA-only tests (cuda_tests.txt) on the GPU",
        ),
    )
}

# The device calls docs/gpu.md lists, in order of priority: parts joined by commas run in one
# call (one process); each call's limit is the sum of its parts' (at most 600 s a call).
CALLS = ("generate", "clip,embed", "llm,check")


def call_timeout(call: str) -> int:
    """The ``timeout_s`` of a device call running the comma-separated parts ``call``."""
    return min(600, sum(PARTS[p].timeout_s for p in call.split(",")))
