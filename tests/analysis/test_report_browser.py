"""The report as a person reads it, in a real browser (headless Chromium, Debian's `chromium`;
.ci/run installs it where missing): the report of the packaged parts loads every image, nothing
is wider than the page, the console logs no error, and its table sorts and filters without a
server. Each planted fault (a table too wide, an image path broken, a script that fails) must
fail the check. Screenshots go to DLBENCH_ARTIFACTS where set (CI keeps them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dlbench.results.published import PACKAGED_DIR
from tests.conftest import run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (.ci/run installs it)"),
]
WIDTH = 1400  # a laptop's window
# Installed before the page's own scripts: every error it raises is counted
CATCH = (
    "<script>window.__errors=[];"
    "window.addEventListener('error',e=>__errors.push(String(e.message)));</script>"
)
# Run once the page has loaded: what a reader would meet, written into the page for --dump-dom
CHECK = """<script>window.addEventListener('load', function () {
  var broken = Array.prototype.filter.call(document.images, function (i) {
    return !i.complete || i.naturalWidth === 0;
  }).map(function (i) { return i.alt; });
  var wide = Array.prototype.filter.call(document.body.querySelectorAll('*'), function (e) {
    var box = e.closest('.wide'); return !box && e.getBoundingClientRect().right > innerWidth + 1;
  }).map(function (e) { return e.tagName; });
  var table = document.querySelector('table.runs'), sorted = null, filtered = null;
  if (table) {
    var first = function () { return table.tBodies[0].rows[0].cells[0].textContent; };
    var before = first(); table.tHead.rows[0].cells[0].click(); var up = first();
    table.tHead.rows[0].cells[0].click(); sorted = up !== first() || before !== up;
    var filter = document.querySelector('input.filter'); filter.value = 'zzz-nothing';
    filter.dispatchEvent(new Event('input'));
    filtered = Array.prototype.every.call(table.tBodies[0].rows, function (r) { return r.hidden; });
  }
  var out = document.createElement('pre'); out.id = 'browser-check';
  out.textContent = JSON.stringify({images: document.images.length, broken: broken, wide: wide,
    scroll: document.documentElement.scrollWidth, errors: window.__errors,
    sorted: sorted, filtered: filtered});
  document.body.appendChild(out);
});</script>"""


def _checked(page: Path, shots: Path) -> dict:
    """The page as Chromium renders it at WIDTH: CHECK's findings, and a screenshot."""
    text = page.read_text(encoding="utf-8")
    probe = page.with_name(f"checked-{page.name}")
    probe.write_text(
        text.replace("<head>", "<head>" + CATCH, 1).replace("</body>", CHECK + "</body>", 1),
        encoding="utf-8",
    )
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--window-size={WIDTH},1000", "--virtual-time-budget=15000"]  # fmt: skip
    dom = subprocess.run([*common, "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=180).stdout  # fmt: skip
    shots.mkdir(parents=True, exist_ok=True)
    subprocess.run([*common, f"--screenshot={shots / (page.stem + '.png')}", page.as_uri()],
                   capture_output=True, timeout=180)  # fmt: skip
    start = dom.index('<pre id="browser-check">') + len('<pre id="browser-check">')
    return json.loads(dom[start : dom.index("</pre>", start)].replace("&quot;", '"'))


def _healthy(found: dict) -> bool:
    return (
        found["images"] > 0
        and not found["broken"]
        and not found["wide"]
        and found["scroll"] <= WIDTH
        and not found["errors"]
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    done = run_cli("report", *sorted(PACKAGED_DIR.glob("*.csv")), "--out", out, timeout=300)
    assert done.returncode == 0, done.stderr
    return out / "report.html"


def _shots(name: str, tmp_path: Path) -> Path:
    return Path(os.environ.get("DLBENCH_ARTIFACTS", tmp_path)) / "browser" / name


def test_the_report_of_the_packaged_parts_reads_whole_in_a_browser(report, tmp_path):
    found = _checked(report, _shots("report", tmp_path))
    assert _healthy(found), found
    assert found["sorted"] is True and found["filtered"] is True  # no server, no network


@pytest.mark.parametrize(
    ("fault", "planted"),
    [
        ("wide", ("</h1>", "</h1><table><tr><td style='min-width:3000px'>wide</td></tr></table>")),
        ("broken", ("src='data:image/png;base64,", "src='missing.png' data-was='")),
        ("errors", ("</body>", "<script>undefined_function_of_a_fault()</script></body>")),
    ],
)  # fmt: skip
def test_each_planted_fault_fails_the_check(report, tmp_path, fault, planted):
    page = tmp_path / "report.html"
    page.write_text(report.read_text(encoding="utf-8").replace(*planted, 1), encoding="utf-8")
    found = _checked(page, _shots(f"fault-{fault}", tmp_path))
    assert not _healthy(found) and found[fault], (fault, found)
