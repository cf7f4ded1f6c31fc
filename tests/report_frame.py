"""What a reader sees of a study report, measured in real headless Chromium at 1400 x 900.

:func:`frame_probe` renders a probed copy of ``report.html`` (the report itself has no script)
and returns, from the DOM after load: the page height, the first section's id and its box,
the figures drawn (their ``figure`` ids), the tables whose data cells are all "–" and the
columns that are "–" in every row, and the findings' text. Used by the demo's report test
(test_demo) and the model-only report test (test_report_frame).
"""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

from test_report_browser import console_lines, run_chromium

WIDTH, HEIGHT = 1400, 900  # the first screen the findings must fit in

PROBE = """<script>
window.addEventListener('load', function () {
  var out = {};
  out.height = document.documentElement.scrollHeight;
  out.width = window.innerWidth;
  var first = document.querySelector('body > section, body > h2, body > table, body > figure');
  out.first_id = first ? (first.id || first.tagName) : null;
  var box = document.getElementById('findings');
  var r = box ? box.getBoundingClientRect() : null;
  out.findings_top = r ? r.top + window.scrollY : -1;
  out.findings_bottom = r ? r.bottom + window.scrollY : -1;
  out.findings_text = box ? box.textContent.replace(/\\s+/g, ' ').trim() : '';
  out.figures = Array.prototype.slice.call(document.querySelectorAll('figure[id^="fig-"]'))
    .map(function (f) { return f.id; });
  out.broken = Array.prototype.slice.call(document.images)
    .filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).length;
  out.dash_tables = []; out.dash_columns = [];
  document.querySelectorAll('table').forEach(function (t, ti) {
    var rows = Array.prototype.slice.call(t.querySelectorAll('tbody tr'));
    var cells = [];
    rows.forEach(function (tr) { cells.push(Array.prototype.slice.call(tr.querySelectorAll('td'))
      .map(function (c) { return c.textContent.trim(); })); });
    var flat = [].concat.apply([], cells).filter(function (x) { return x !== ''; });
    var name = t.id || (t.caption ? t.caption.textContent.trim().slice(0, 60) : 'table ' + ti);
    if (rows.length && flat.length && flat.every(function (x) { return x === '–'; }))
      out.dash_tables.push(name);
    if (rows.length < 2) return;
    var n = cells[0].length;
    if (!cells.every(function (c) { return c.length === n; })) return;
    for (var j = 0; j < n; j++) {
      if (cells.every(function (c) { return c[j] === '–'; }))
        out.dash_columns.push(name + ' col ' + j);
    }
  });
  out.generated = Array.prototype.slice.call(
    document.querySelectorAll('#generated-table tbody tr')).map(function (tr) {
      return Array.prototype.slice.call(tr.querySelectorAll('td'))
        .map(function (c) { return c.textContent.trim(); }); });
  out.sections = Array.prototype.slice.call(document.querySelectorAll('h2[id]'))
    .map(function (h) { return h.id; });
  var pre = document.createElement('pre');
  pre.id = 'frame-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def frame_probe(report: Path, tmp_path: Path) -> dict:
    """The measurements of the module docstring for ``report``, rendered 1400 px wide."""
    page = report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>", 1)
    copy = tmp_path / "frame_probed.html"
    copy.write_text(page, encoding="utf-8")
    proc = run_chromium(
        [f"--window-size={WIDTH},{HEIGHT}", "--dump-dom", copy.as_uri()],
        tmp_path / "profile-frame",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="frame-probe">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found, "the page did not finish loading:\n" + proc.stdout[-1500:]
    out = json.loads(html_lib.unescape(found.group(1)))
    out["console"] = console_lines(proc.stderr)
    return out


def assert_reader_frame(out: dict) -> None:
    """The checks every report passes: the findings summary first and inside the first screen,
    no table or column of dashes, every image decoded, a quiet console."""
    assert out["width"] == WIDTH, out["width"]
    assert out["first_id"] == "findings", out["first_id"]
    assert 0 < out["findings_top"] < out["findings_bottom"] <= HEIGHT, out
    assert out["dash_tables"] == [], out["dash_tables"]
    assert out["dash_columns"] == [], out["dash_columns"]
    assert out["broken"] == 0 and out["console"] == []
