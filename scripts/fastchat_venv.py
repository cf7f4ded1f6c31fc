"""Build a virtual environment with FastChat for the opt-in test of
``tests/backends/test_real_servers.py`` (controller, model worker and OpenAI API server on the
loopback address, over a tiny random-weight Llama built offline).

FastChat 0.2.36 (the last release) needs a transformers 4.x (its model worker does not load
with transformers 5), so it cannot live in the project's ``.venv``. torch is **not**
installed again: PyPI's Linux torch wheels are CUDA builds of several GB and the CPU index is
often unreachable, so the new environment reads the project environment's packages through a
``.pth`` file *after* its own (its transformers 4.x, huggingface_hub 0.x and tokenizers win;
torch, numpy, fastapi come from ``.venv``). pip never touches ``.venv`` (it does not
uninstall outside the environment it installs into).

Usage::

    .venv/bin/python scripts/fastchat_venv.py [VENV]   # default .cache/fastchat-venv (git-ignored)
    export CORPUS_AUDIT_FASTCHAT_PYTHON=VENV/bin/python
    .venv/bin/python -m pytest tests/backends/test_real_servers.py -k fastchat
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

#: what FastChat's three processes import, pinned to versions that work together
PINS = (
    "fschat[model_worker]==0.2.36",
    "transformers==4.46.3",
    "tokenizers>=0.20,<0.21",
    "huggingface_hub>=0.26,<1.0",
    "accelerate>=0.34,<1.2",
    "peft<0.14",
)
PTH = "zz_corpus_audit_project_venv.pth"


def purelib(python: Path) -> str:
    """The site-packages folder of the environment of ``python``."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def build(venv: Path, base_python: str = sys.executable) -> Path:
    """Make ``venv`` (if missing), link the project environment's packages after its own,
    install :data:`PINS`; the new environment's python."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    (Path(purelib(python)) / PTH).write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
    )
    subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *PINS],
        check=True,
    )
    with tempfile.TemporaryDirectory() as logs:  # FastChat opens its log files on import
        subprocess.run(
            [str(python), "-c", "import fastchat.serve.openai_api_server, transformers, torch"],
            check=True,
            cwd=logs,
        )
    return python


def main(argv: list[str]) -> int:
    venv = Path(argv[0] if argv else ".cache/fastchat-venv").absolute()
    python = build(venv)
    print(f"export CORPUS_AUDIT_FASTCHAT_PYTHON={python}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
