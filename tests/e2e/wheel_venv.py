"""Build corpus_audit's wheel and install it into a fresh virtual environment, as a pip user
would (tests/commands/test_demo.py's wheel test).

The wheel is built (``pip wheel --no-deps --no-build-isolation``) from a copy of the files git
tracks or would track (never a stale ``build/``), into a fresh ``venv``. Packages come from the
package registries pip is configured with (pip's own index settings, its cache, find-links).
torch and its CUDA libraries are not installed again (gigabytes, minutes): a ``.pth`` file adds
a folder of links to the test environment's torch, its CUDA, triton, sympy, mpmath and
networkx, which pip then counts as installed; everything else is installed in the venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# top-level names (folders and dist-info) of torch and the distributions it pulls in
SHARED_PATTERNS = (
    "torch",
    "torch-*.dist-info",
    "torchgen",
    "functorch",
    "nvidia",
    "nvidia_*.dist-info",
    "cuda",
    "cuda_*.dist-info",
    "triton",
    "triton-*.dist-info",
    "sympy",
    "sympy-*.dist-info",
    "mpmath",
    "mpmath-*.dist-info",
    "networkx",
    "networkx-*.dist-info",
)


def _clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH and VIRTUAL_ENV: the test's own checkout (and its
    egg-info) must not count as installed."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    kw.setdefault("env", _clean_env())
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def build_wheel(work: Path) -> Path:
    """The wheel of the working tree (tracked and untracked, not ignored files), in ``work``."""
    files = _run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO
    ).stdout.split("\0")
    src = work / "src"
    for rel in filter(None, files):
        source = REPO / rel
        if source.is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, src / rel)
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(work / "dist"), str(src)]
    )
    (wheel,) = (work / "dist").glob("corpus_audit-*.whl")
    return wheel


def fresh_venv(path: Path) -> Path:
    """A new venv at ``path`` seeing the shared torch; its ``bin`` folder."""
    _run([sys.executable, "-m", "venv", str(path)])
    shared = path.parent / f"{path.name}-shared-torch"
    shared.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for pattern in SHARED_PATTERNS:
        for entry in site.glob(pattern):
            (shared / entry.name).symlink_to(entry)
    (purelib,) = path.glob("lib/python*/site-packages")
    (purelib / "shared_torch.pth").write_text(f"{shared}\n", encoding="utf-8")
    return path / "bin"


def pip_install(bin_dir: Path, requirement: str) -> None:
    """``pip install requirement`` into the venv (pip's configured registries)."""
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", requirement])


def user_env(home: Path) -> dict[str, str]:
    """The environment of a user outside the repository: no PYTHONPATH, caches under ``home``."""
    env = _clean_env()
    env.update(
        CORPUS_AUDIT_MODEL_DIR=str(home / "models"),
        CORPUS_AUDIT_CACHE=str(home / "cache"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env
