"""Run parts of the GPU kit in this process: ``bench.py PART[,PART...]|all --out DIR [--dry]``.

``benchmarks/gpu/run.sh`` calls this after installing the carried wheels (docs/gpu.md has the
device calls). Without ``--dry`` a CUDA GPU is required; ``--dry`` runs every step on the CPU
at tiny sizes (tests/e2e/test_gpu_kit.py). Each part writes ``DIR/<part>.json`` (status ok |
error, versions, results); the exit status is 1 when a part failed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # the project

from common import PARTS, Context, log  # noqa: E402


def parse_parts(text: str) -> list[str]:
    """``all`` or a comma-separated list of part names, checked."""
    names = list(PARTS) if text == "all" else [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in PARTS]
    if unknown or not names:
        raise SystemExit(
            f"error: unknown part {', '.join(unknown) or text!r} (parts: {', '.join(PARTS)}, all)"
        )
    return names


def missing(part: str) -> list[str]:
    """The modules ``part`` imports that are not importable here."""
    return [m for m in PARTS[part].needs if importlib.util.find_spec(m) is None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parts", help="a part, several joined by commas, or all")
    ap.add_argument("--out", required=True, type=Path, help="folder for <part>.json")
    ap.add_argument("--dry", action="store_true", help="tiny sizes on the CPU")
    args = ap.parse_args(argv)
    names = parse_parts(args.parts)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
    except ImportError:
        print(
            f"error: torch is not importable by {sys.executable} (the accelerator machine has "
            "torch 2.11; here, run with the project's venv: PY=.venv/bin/python)",
            file=sys.stderr,
        )
        return 2
    try:  # progress bars of model saving/loading would fill the log
        import transformers.utils.logging as tlog

        tlog.disable_progress_bar()
    except ImportError:
        pass
    log(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU: {torch.cuda.is_available()}")
    if args.dry:
        device = "cpu"
        torch.set_num_threads(1)  # tiny models: one thread is fastest on a shared CPU
    elif torch.cuda.is_available():
        device = "cuda"
    else:
        print(
            "error: no CUDA GPU here (torch.cuda.is_available() is False); "
            "use --dry on a machine without one",
            file=sys.stderr,
        )
        return 2
    failed = []
    for name in names:
        ctx = Context(name, args.out, args.dry, device)
        lacking = missing(name)
        if lacking:
            ctx.fail(
                RuntimeError(
                    f"part {name}: cannot import {', '.join(lacking)} "
                    f"(carry .whl/{name}, see docs/gpu.md)"
                )
            )
            failed.append(name)
            continue
        log(f"part {name} on {device}{' (dry)' if args.dry else ''}: {PARTS[name].what}")
        try:
            importlib.import_module(PARTS[name].module).run(ctx)
        except Exception as exc:
            ctx.fail(exc)
            failed.append(name)
            continue
        ctx.save("ok")
        log(f"part {name}: ok in {ctx.record['wall_s']} s -> {ctx.path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
