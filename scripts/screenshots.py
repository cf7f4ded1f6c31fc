"""Screenshots of the study reports' first screens (1400 x 900 px), from the real pages.

Renders ``report/report.html`` of a demo study and of a model-only study in Debian's headless
Chromium and writes ``docs/images/report_demo.png`` and ``docs/images/report_model_only.png``;
``--height`` instead prints each page's full height at 1400 px wide (the number the report tests bound).

    python scripts/screenshots.py DEMO_STUDY MODEL_ONLY_STUDY        # the two PNGs
    python scripts/screenshots.py --height STUDY [STUDY ...]         # heights in px

A study argument is a study directory (its ``report/report.html``) or an HTML file. Build the
studies first: ``corpus-audit demo DIR`` and a model-only study (docs/model_only.md).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTH, HEIGHT = 1400, 900  # px: the first screen the issue asks the findings to fit in
OUT = Path(__file__).resolve().parents[1] / "docs" / "images"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--run-all-compositor-stages-before-draw",  # the whole first screen painted, not tiles
    "--virtual-time-budget=15000",
]
# written into a copy of the page: its height after load, as JSON in a <pre>
HEIGHT_PROBE = """<script>window.addEventListener('load', function () {
  var pre = document.createElement('pre'); pre.id = 'height-probe';
  pre.textContent = JSON.stringify({height: document.documentElement.scrollHeight});
  document.body.appendChild(pre); });</script>"""


def chromium() -> str:
    """The Chromium binary; exits with one line when there is none."""
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    sys.exit("screenshots: Chromium is not installed (Debian package `chromium`)")


def page_of(arg: str) -> Path:
    """The report page of a study directory, or the HTML file itself."""
    path = Path(arg)
    page = path / "report" / "report.html" if path.is_dir() else path
    if not page.is_file():
        sys.exit(f"screenshots: {page}: no such report page (run `corpus-audit report` first)")
    return page


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    return subprocess.run(
        [chromium(), *FLAGS, f"--window-size={WIDTH},{HEIGHT}", f"--user-data-dir={profile}"]
        + args,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )


def page_height(page: Path, width: int = WIDTH) -> int:
    """The page's full height in px (``scrollHeight``) rendered ``width`` px wide."""
    text = page.read_text(encoding="utf-8").replace("</body>", HEIGHT_PROBE + "</body>", 1)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "probed.html"
        copy.write_text(text, encoding="utf-8")
        proc = _run(["--dump-dom", copy.as_uri()], Path(tmp) / "profile")
    found = re.search(r'<pre id="height-probe">(.*?)</pre>', proc.stdout, re.DOTALL)
    if not found:
        sys.exit(f"screenshots: {page}: the page did not finish loading in Chromium")
    return int(json.loads(html.unescape(found.group(1)))["height"])


def screenshot(page: Path, out: Path) -> Path:
    """The page's first screen (:data:`WIDTH` x :data:`HEIGHT`) as the PNG ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc = _run([f"--screenshot={out}", page.as_uri()], Path(tmp) / "profile")
    if proc.returncode != 0 or not out.is_file():
        sys.exit(f"screenshots: {page}: Chromium wrote no screenshot ({proc.stderr[-300:]})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--height", action="store_true", help="print page heights instead")
    parser.add_argument("studies", nargs="+", help="study directories or report pages")
    args = parser.parse_args(argv)
    pages = [page_of(s) for s in args.studies]
    if args.height:
        for page in pages:
            print(f"{page}: {page_height(page)} px high at {WIDTH} px wide")
        return 0
    if len(pages) != 2:
        parser.error("give the demo study and the model-only study")
    for page, name in zip(pages, ("report_demo.png", "report_model_only.png"), strict=True):
        print(screenshot(page, OUT / name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
