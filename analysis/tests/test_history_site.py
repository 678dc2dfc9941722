"""``loadgen-analyze history site`` (issue 48): the history store of real runs (the session's
``service_series``: a 5 ms service that became 8 ms) as a static site — the index of series,
a page per series with the gate's judgement exactly as ``history check`` prints it, relative
links that resolve on disk, a run's report linked by its ``report`` label — opened in headless
Chromium with no network: every figure decodes and no resource is fetched.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from .conftest import run_cli
from .test_dashboard_browser import NO_NETWORK
from .test_history import GATE
from .test_report_browser import _chromium

#: Written into a copy of a page: what loaded, what did not, and the table's numbers.
_PROBE = """
<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({
    images: images.length,
    broken: images.filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.alt),
    fetched: performance.getEntriesByType("resource").map((e) => e.name),
    cells: [...document.querySelectorAll("table td")].map((td) => td.textContent),
  });
  document.body.appendChild(out);
});
</script>
"""


def _probe(page: Path) -> dict:
    probed = page.with_name(f"probed-{page.name}")
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    command = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", NO_NETWORK]
    command += ["--virtual-time-budget=5000", "--dump-dom", probed.as_uri()]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    probed.unlink()
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"chromium printed no probe (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _links(page: Path) -> list[str]:
    return re.findall(r"href='([^']*)'", page.read_text())


@pytest.fixture(scope="module")
def site(service_series: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of the step store, with GATE's limit and metrics."""
    out = tmp_path_factory.mktemp("site") / "site"
    proc = run_cli("history", "site", "--store", service_series["step"], "-o", out, *GATE)
    assert proc.returncode == 0, proc.stderr
    assert "1 series page" in proc.stdout, proc.stdout
    return out


def test_the_index_lists_the_series_with_its_newest_values_and_status(
    site: Path, service_series: dict
) -> None:
    index = (site / "index.html").read_text()
    assert "15 runs in 1 series" in index
    (row,) = re.findall(r"<tr><td><a href='(series-[0-9a-f]{12}\.html)'>", index)
    assert (site / row).exists()
    newest = json.loads((service_series["8ms"][-1] / "run.json").read_text())["run_id"]
    assert newest in index and "class='regression'" in index


def test_the_pages_say_what_history_check_says(site: Path, service_series: dict) -> None:
    check = run_cli("history", "check", "--store", service_series["step"], *GATE)
    assert check.returncode == 99, check.stdout
    index = (site / "index.html").read_text()
    gate = re.search(r"<pre id='gate'>(.*?)</pre>", index, re.S)
    assert gate and _unescape(gate.group(1)) == check.stdout.strip()
    (page,) = site.glob("series-*.html")
    judgement = re.search(r"<pre id='judgement'>(.*?)</pre>", page.read_text(), re.S)
    assert judgement
    # The series is the newest run's: its judgement is check's, line for line.
    lines = _unescape(judgement.group(1)).splitlines()
    assert lines and all(line in check.stdout.splitlines() for line in lines)
    assert any(line.startswith("REGRESSION: p50_ms") for line in lines)
    assert "run 11 of 15" in page.read_text()  # the change point, where the 8 ms runs begin


def test_every_link_is_relative_and_resolves(site: Path) -> None:
    for page in site.glob("*.html"):
        for link in _links(page):
            assert not urlsplit(link).scheme and not link.startswith("/"), (page, link)
            assert (site / link).exists(), (page, link)


def test_a_runs_report_label_is_its_link(service_series: dict, tmp_path: Path) -> None:
    store, out = tmp_path / "store", tmp_path / "site"
    run = service_series["5ms"][0]
    report = out / "reports" / "first.html"
    assert run_cli("report", run, "-o", report).returncode == 0
    label = "report=reports/first.html"
    assert run_cli("history", "add", run, "--store", store, "--label", label).returncode == 0
    hostile = "report=javascript:alert(1)"
    other = service_series["5ms"][1]
    assert run_cli("history", "add", other, "--store", store, "--label", hostile).returncode == 0
    proc = run_cli("history", "site", "--store", store, "-o", out)
    assert proc.returncode == 0, proc.stderr
    (page,) = out.glob("series-*.html")
    assert "reports/first.html" in _links(page)
    assert not any("javascript" in link for link in _links(page))
    assert "too few runs" in (out / "index.html").read_text()


def test_the_site_opens_offline_in_chromium(site: Path) -> None:
    index = _probe(site / "index.html")
    assert not index["fetched"], index
    assert any(re.fullmatch(r"[\d,.]+", cell) for cell in index["cells"]), index
    (page,) = site.glob("series-*.html")
    found = _probe(page)
    assert found["images"] >= 2 and not found["broken"], found
    assert not found["fetched"], found
    assert any(re.fullmatch(r"[\d,.]+", cell) for cell in found["cells"]), found


def test_bad_input_is_one_sentence_and_exit_2(service_series: dict, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args in (
        ("--store", tmp_path / "no-store", "-o", tmp_path / "site"),
        ("--store", service_series["step"], "-o", blocker),
        ("--store", service_series["step"], "-o", "/proc/site"),
        ("--store", service_series["step"], "-o", service_series["step"] / "site"),
    ):
        proc = run_cli("history", "site", *args)
        assert proc.returncode == 2, proc
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "site").exists()


def _unescape(text: str) -> str:
    return (
        text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#x27;", "'")
        .replace("&quot;", '"')
        .replace("&amp;", "&")
        .strip()
    )
