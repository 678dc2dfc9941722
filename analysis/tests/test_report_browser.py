"""The HTML reports as a reader sees them: opened in headless Chromium (Debian's ``chromium``
package; scripts/test-python.sh installs it when it can), every figure must have decoded and
nothing may stick out of the page. Skipped, with the reason, where no Chromium is installed.

A copy of the page gets a script that, once loaded, writes what it found into the DOM, which
``chromium --headless --dump-dom`` prints: no driver, no extra Python package.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from loadgen_analysis.testing import unavailable

from .conftest import run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"
WIDTH = 1280

_PROBE = """
<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const broken = images.filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.alt);
  const limit = document.documentElement.clientWidth;
  const wide = [...document.body.querySelectorAll("*")]
    .filter((e) => e.getBoundingClientRect().right > limit + 1)
    .map((e) => e.tagName + (e.className ? "." + e.className : ""));
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({ images: images.length, broken, wide,
    scroll: document.documentElement.scrollWidth, limit });
  document.body.appendChild(out);
});
</script>
"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    unavailable.missing("chromium", "no Chromium on PATH (Debian: apt-get install chromium)")
    raise AssertionError("unreachable")


def _probe(page: Path, tmp_path: Path) -> dict:
    browser = _chromium()
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    command += [f"--window-size={WIDTH},900", "--virtual-time-budget=10000", "--dump-dom"]
    proc = subprocess.run(
        [*command, probed.as_uri()], capture_output=True, text=True, timeout=120, check=False
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"chromium printed no probe (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.parametrize(
    "args",
    [
        ("report", DATA / "sweep-w8-10ms"),
        ("report", DATA / "overview"),
        ("compare", DATA / "regression" / "baseline-5ms", DATA / "regression" / "candidate-8ms"),
    ],
    ids=["sweep report", "phased run report", "compare page"],
)
def test_every_figure_decodes_and_nothing_overflows(args: tuple, tmp_path: Path) -> None:
    _chromium()
    page = tmp_path / "page.html"
    flag = "-o" if args[0] == "report" else "--html"
    proc = run_cli(*args, flag, page)
    assert proc.returncode in (0, 1), proc.stderr
    found = _probe(page, tmp_path)
    assert found["images"] >= 2 and not found["broken"], found
    assert not found["wide"] and found["scroll"] <= found["limit"], found
