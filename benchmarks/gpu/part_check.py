"""Part ``check``: the project's CUDA-only tests (``cuda_tests.txt``) run on the accelerator.

pytest runs them in a child process (``-p no:cacheprovider``, JUnit XML under the output
folder); the JSON has the counts and each test's outcome. The dry run collects them only
(``--collect-only``): every listed test must still exist. The generation checks (bit-identical
images for the same seeds) are in part ``generate``, the CLIP fp16/fp32 label check in part
``clip``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

from common import KIT, REPO, Context, log


def listed() -> list[str]:
    """The test node ids of ``cuda_tests.txt`` (comments and blank lines skipped)."""
    lines = (KIT / "cuda_tests.txt").read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def outcomes(xml_path: str) -> list[dict[str, Any]]:
    """One row per test case of a JUnit XML file: name, outcome, seconds, message."""
    rows = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome, message = tag, (node.get("message") or "")[:300]
                break
        rows.append(
            {
                "test": f"{case.get('classname')}::{case.get('name')}",
                "outcome": outcome,
                "seconds": float(case.get("time") or 0),
                "message": message,
            }
        )
    return rows


def run(ctx: Context) -> None:
    tests = listed()
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-W",
        "ignore::DeprecationWarning",
    ]
    if ctx.dry:  # collect in this process (the modules are imported already: fast)
        import pytest

        class Collector:
            items: list[str] = []

            def pytest_collection_finish(self, session: Any) -> None:
                Collector.items = [item.nodeid for item in session.items]

        rc = int(
            pytest.main(
                [
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "--collect-only",
                    "--rootdir",
                    str(REPO),
                    *[str(REPO / t) for t in tests],
                ],
                plugins=[Collector()],
            )
        )
        files = {t.split("::")[0] for t in tests}
        found = [i for i in Collector.items if i.split("::")[0] in files]
        ctx.step("collected", {"listed": len(tests), "collected": len(found), "rc": rc})
        if rc != 0 or len(found) < len(tests):
            raise RuntimeError(
                f"cuda_tests.txt: {len(found)} of {len(tests)} tests collected (pytest rc {rc})"
            )
        return
    xml = str(ctx.out / "check-junit.xml")
    proc = subprocess.run(
        [*cmd, "-rA", f"--junitxml={xml}", *tests],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    print(proc.stdout[-6000:], proc.stderr[-2000:], flush=True)
    rows = outcomes(xml) if os.path.exists(xml) else []
    counts = {
        k: sum(r["outcome"] == k for r in rows) for k in ("passed", "failure", "error", "skipped")
    }
    ctx.step(
        "tests",
        {
            "rc": proc.returncode,
            "listed": len(tests),
            **counts,
            "cases": rows,
            "ok": proc.returncode == 0 and counts["passed"] > 0,
        },
    )
    log(f"check: pytest rc {proc.returncode}, {counts}")
