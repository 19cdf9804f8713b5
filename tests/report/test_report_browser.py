"""The report in a real headless browser (Debian's ``chromium``): the page loads, every chart image decodes with a
non-zero size, no console message, and a screenshot is not blank. Skipped when chromium is not installed.

A copy of the page gets a probe script (test-only; the report itself has no script): on ``load`` it reports each
``<img>``'s decode state in a ``data-probe`` attribute, read back from ``--dump-dom``, and ``console.error``s any
broken image, caught through ``--enable-logging=stderr``.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
NO_CHROMIUM = ("chromium is not installed: it is optional (`make system` installs it only as root; "
               "sudo apt-get install chromium) and only this test needs it")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]

PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  const bad = imgs.filter(i => !i.complete || i.naturalWidth === 0 || i.naturalHeight === 0);
  bad.forEach(i => console.error("broken chart: " + i.alt));
  document.body.setAttribute("data-probe", JSON.stringify({
    n: imgs.length, ok: imgs.length - bad.length, widths: imgs.map(i => i.naturalWidth),
    sections: document.querySelectorAll("section").length}));
});
</script>"""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000"]


def _chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args], capture_output=True,
                          text=True, timeout=180)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, int]:
    pytest.importorskip("matplotlib")
    from conftest import write_complete_tree

    from rlvr.report import ReportParams, build_report

    root = write_complete_tree(tmp_path_factory.mktemp("browser"))  # every section, final eval and repair included
    out = root / "reports" / "index.html"
    summary = build_report(ReportParams(bootstrap=100), root / "metrics", root / "data", out)
    return out, summary["charts"]


@pytest.mark.parametrize(("name", "sections", "charts"), [("index.html", 6, 10), ("cost.html", 2, 2)])
def test_page_loads_charts_render_no_console_errors(page, tmp_path, name, sections, charts):
    """The report and its uncached cost page (linked from the report's Cost section) both render."""
    out, n_charts = page
    html = (out.parent / name).read_text(encoding="utf-8")
    if name == "index.html":
        assert html.count('<img class="chart"') == n_charts and 'href="cost.html"' in html
    n_charts = html.count('<img class="chart"')
    probed = out.parent / f"probed-{name}"  # beside the page, so its relative links resolve
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    res = _chromium(["--dump-dom", probed.as_uri()], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    m = re.search(r'data-probe="([^"]*)"', res.stdout)
    assert m, f"page did not finish loading; stderr: {res.stderr[-2000:]}"
    probe = json.loads(html_lib.unescape(m.group(1)))
    assert probe["sections"] >= sections
    assert probe["n"] == n_charts >= charts
    assert probe["ok"] == probe["n"] and all(w > 0 for w in probe["widths"])
    console = [ln for ln in res.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console


def test_screenshot_not_blank(page, tmp_path):
    from PIL import Image

    out, _ = page
    shot = tmp_path / "report.png"
    res = _chromium(["--hide-scrollbars", "--window-size=1400,2400", f"--screenshot={shot}", out.as_uri()], tmp_path)
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 2400)
    colors = img.getcolors(maxcolors=1_000_000)
    assert colors is None or len(colors) > 50  # text, bars and lines, not a blank page
