"""The report in a real browser: Debian's headless Chromium renders it from disk, offline.

Checks that the results table and the figures show (every image decodes, non-zero size), that
nothing external is requested, that the `<script>` caption stays text (no alert runs), and
that the console stays empty. Keeps a screenshot in ``tests/artifacts/report.png``.

Chromium is a system package: ``make test`` installs it (``make browser``). Without it the
test FAILS with that hint rather than skipping, so a missing browser is never mistaken for a
pass.
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from study_builder import build_reported

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=15000",
]

# Injected into a COPY of the report (the report itself has no script): the head part
# records alert() calls, the body part measures the page after load and writes JSON.
HEAD_PROBE = (
    "<script>window.__alerts = 0; window.alert = function () { window.__alerts++; };</script>"
)
BODY_PROBE = """<script>
window.addEventListener('load', function () {
  var out = {};
  var table = document.getElementById('results-table');
  out.results_rows = table ? table.querySelectorAll('tbody tr').length : -1;
  out.results_height = table ? table.getBoundingClientRect().height : 0;
  var summary = document.getElementById('indicator-summary');
  out.indicator_rows = summary ? summary.querySelectorAll('tbody tr').length : -1;
  var imgs = Array.prototype.slice.call(document.images);
  out.images = imgs.length;
  out.broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).length;
  var figs = Array.prototype.slice.call(document.querySelectorAll('figure[id^="fig-"] img'));
  out.figures = figs.length;
  out.figure_min_width = figs.length ? Math.min.apply(null, figs.map(function (i) {
    return i.getBoundingClientRect().width; })) : 0;
  out.external = Array.prototype.slice.call(document.querySelectorAll('[src],[href]'))
    .map(function (e) { return e.getAttribute('src') || e.getAttribute('href'); })
    .filter(function (u) { return !(u.indexOf('data:') === 0 || u.indexOf('#') === 0); });
  out.scripts = document.scripts.length;
  out.alerts = window.__alerts;
  out.script_caption_text = document.body.textContent.indexOf('<script>alert(1)<' + '/script>') >= 0;
  var pre = document.createElement('pre');
  pre.id = 'probe-result';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    """Path of the Chromium binary, or a test failure saying how to install it."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    pytest.fail(
        "Chromium is not installed (looked for chromium, chromium-browser, /usr/bin/chromium): "
        "`make test` installs it (Debian package `chromium`, via `make browser`); the report "
        "browser test needs it"
    )


def run_chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )


def console_lines(stderr: str) -> list[str]:
    """Page console messages (and uncaught errors) in Chromium's stderr log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def probe(report: Path, tmp_path: Path) -> tuple[dict, list[str]]:
    """Render a probed copy of ``report``; returns the probe's measurements and console."""
    page = report.read_text(encoding="utf-8")
    page = page.replace("<head>", "<head>" + HEAD_PROBE, 1).replace(
        "</body>", BODY_PROBE + "</body>", 1
    )
    copy = tmp_path / "probed.html"
    copy.write_text(page, encoding="utf-8")
    proc = run_chromium(["--dump-dom", copy.as_uri()], tmp_path / "profile-probe")
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found, "the page did not finish loading:\n" + proc.stdout[-1500:]
    return json.loads(html_lib.unescape(found.group(1))), console_lines(proc.stderr)


@pytest.fixture(scope="module")
def reports(tmp_path_factory, shared_data) -> dict[str, Path]:
    chromium()  # fail first, before building anything, if there is no browser
    corpus = [
        shared_data / "laion400m_sample_10k.parquet",
        shared_data / "coco_val2017_captions.parquet",
    ]
    return {
        "full": build_reported(tmp_path_factory.mktemp("browser_full") / "study", corpus),
        "captions": build_reported(
            tmp_path_factory.mktemp("browser_captions") / "study", corpus, with_images=False
        ),
    }


def test_full_report_renders_in_chromium(reports, tmp_path: Path):
    out, console = probe(reports["full"], tmp_path)
    assert console == [], console
    assert out["results_rows"] >= 8 and out["results_height"] > 100  # 2 models x 4+ strategies
    assert out["figures"] >= 6 and out["figure_min_width"] > 200
    assert out["images"] > out["figures"] and out["broken"] == 0  # thumbnails decode too
    assert out["external"] == []
    assert out["scripts"] == 2  # the two probes: the report itself has none
    assert out["alerts"] == 0 and out["script_caption_text"]


def test_caption_only_report_renders_in_chromium(reports, tmp_path: Path):
    out, console = probe(reports["captions"], tmp_path)
    assert console == [], console
    assert out["results_rows"] == -1  # no amplification without images: said in a note
    assert out["indicator_rows"] == 5
    assert out["figures"] == 2 and out["broken"] == 0
    assert out["external"] == [] and out["alerts"] == 0 and out["script_caption_text"]


def test_screenshot_artifact(reports, tmp_path: Path):
    from PIL import Image

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    proc = run_chromium(
        ["--window-size=1280,2400", f"--screenshot={shot}", reports["full"].as_uri()],
        tmp_path / "profile-shot",
    )
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    assert console_lines(proc.stderr) == []
    with Image.open(shot) as im:
        assert im.size == (1280, 2400)
        small = im.convert("RGB").resize((128, 240))
        colours = small.getcolors(maxcolors=128 * 240)
        assert colours is not None and len(colours) > 200  # text, tables and figures, not blank
        top = im.convert("L").crop((0, 0, 1280, 200))
        assert top.getextrema()[0] < 60  # the dark title text is drawn


def test_full_report_leads_with_its_findings(reports, tmp_path: Path):
    """Issue 41: an amplification study's report opens with per-model mean amplification per
    strategy (bootstrap intervals, level named) inside the first 1400 x 900 screen, with no
    table or column of dashes (no error-rate table without validation labels)."""
    from report_frame import assert_reader_frame, frame_probe

    out = frame_probe(reports["full"], tmp_path)
    print(f"full report: {out['height']} px high at 1400 px wide")
    assert_reader_frame(out)
    text = out["findings_text"]
    assert "sd-tiny-a: mean amplification" in text and "95 % bootstrap intervals" in text
    assert "Generated %female against the labour statistics" in text
    assert out["sections"][:2] == ["results", "generated"]
