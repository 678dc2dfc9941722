"""``loadgen-analyze history site`` (issue 48): the history store of real runs (the session's
``service_series``: a 5 ms service that became 20 ms) as a static site — the index of series,
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

from loadgen_analysis import cli
from loadgen_analysis.history import site as site_module

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
    args = ["history", "site", "--store", str(service_series["step"]), "-o", str(out), *GATE]
    assert cli.main(args) == 0  # in this process: a command's imports would cost seconds
    assert len(list(out.glob("series-*.html"))) == 1
    return out


def test_the_index_lists_the_series_with_its_newest_values_and_status(
    site: Path, service_series: dict
) -> None:
    index = (site / "index.html").read_text()
    assert "15 runs in 1 series" in index
    (row,) = re.findall(r"<tr><td><a href='(series-[0-9a-f]{12}\.html)'>", index)
    assert (site / row).exists()
    newest = json.loads((service_series["20ms"][-1] / "run.json").read_text())["run_id"]
    assert newest in index and "class='regression'" in index


def test_the_pages_say_what_history_check_says(site: Path, service_series: dict, capsys) -> None:
    assert cli.main(["history", "check", "--store", str(service_series["step"]), *GATE]) == 99
    check = capsys.readouterr().out
    index = (site / "index.html").read_text()
    gate = re.search(r"<pre id='gate'>(.*?)</pre>", index, re.S)
    assert gate and _unescape(gate.group(1)) == check.strip()
    (page,) = site.glob("series-*.html")
    judgement = re.search(r"<pre id='judgement'>(.*?)</pre>", page.read_text(), re.S)
    assert judgement
    # The series is the newest run's: its judgement is check's, line for line.
    lines = _unescape(judgement.group(1)).splitlines()
    assert lines and all(line in check.splitlines() for line in lines)
    assert any(line.startswith("REGRESSION: p50_ms") for line in lines)
    assert "run 11 of 15" in page.read_text()  # the change point, where the 20 ms runs begin


def test_every_link_is_relative_and_resolves(site: Path) -> None:
    for page in site.glob("*.html"):
        for link in _links(page):
            assert not urlsplit(link).scheme and not link.startswith("/"), (page, link)
            assert (site / link).exists(), (page, link)


def test_a_runs_report_label_is_its_link(service_series: dict, tmp_path: Path, capsys) -> None:
    store, out = tmp_path / "store", tmp_path / "site"
    run = service_series["5ms"][0]
    # In this process (each command's import would cost seconds): a report, the run added
    # with its label, the site.
    report = out / "reports" / "first.html"
    assert cli.main(["report", str(run), "--dashboard", "-o", str(report)]) == 0
    label = "report=reports/first.html"
    assert cli.main(["history", "add", str(run), "--store", str(store), "--label", label]) == 0
    assert cli.main(["history", "site", "--store", str(store), "-o", str(out)]) == 0
    capsys.readouterr()
    (page,) = out.glob("series-*.html")
    assert "reports/first.html" in _links(page) and (out / "reports" / "first.html").exists()
    assert "too few runs" in (out / "index.html").read_text()


@pytest.mark.parametrize(
    ("label", "link"),
    [
        ("https://ci.example/r/1.html", "https://ci.example/r/1.html"),
        ("reports/1.html", "reports/1.html"),
        ("javascript:alert(1)", None),
        ("file:///etc/passwd", None),
        ("/abs/1.html", None),
        # A backslash is a slash to a browser: these resolve off-site (issue 58).
        ("\\\\evil.example\\x", None),
        ("/\\evil.example/x", None),
        ("\\/evil.example/x", None),
        ("//evil.example/x", None),
        (" //evil.example/x", None),
        ("\t//evil.example/x", None),
        ("reports\\1.html", None),
    ],
)
def test_only_web_and_relative_links_are_linked(label: str, link: str | None) -> None:
    assert site_module.report_link({"labels": json.dumps({"report": label})}) == link


def test_the_site_opens_offline_in_chromium(site: Path) -> None:
    index = _probe(site / "index.html")
    assert not index["fetched"], index
    assert any(re.fullmatch(r"[\d,.]+", cell) for cell in index["cells"]), index
    (page,) = site.glob("series-*.html")
    found = _probe(page)
    assert found["images"] >= 2 and not found["broken"], found
    assert not found["fetched"], found
    assert any(re.fullmatch(r"[\d,.]+", cell) for cell in found["cells"]), found


def test_bad_input_is_one_sentence_and_exit_2(service_series: dict, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args in (
        ("--store", tmp_path / "no-store", "-o", tmp_path / "site"),  # no store
        ("--store", service_series["step"], "-o", blocker),  # -o cannot be a folder
        ("--store", service_series["step"], "-o", service_series["step"] / "site"),  # in it
    ):
        assert cli.main(["history", "site", *map(str, args)]) == 2, args
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "site").exists()


def test_a_series_gone_from_the_store_leaves_no_page_behind(
    service_series: dict, tmp_path: Path
) -> None:
    """A site written again into its folder removes the series pages it no longer has: one
    left there would go on showing figures the store does not hold (issue 58)."""
    out = tmp_path / "site"
    args = ["history", "site", "--store", str(service_series["step"]), "-o", str(out), *GATE]
    assert cli.main(args) == 0
    stale = out / "series-0123456789ab.html"
    stale.write_text("old figures")
    mine = out / "series-notes.html"  # not a name the site writes: left alone
    mine.write_text("mine")
    assert cli.main(args) == 0
    assert not stale.exists()
    assert mine.exists()
    assert len(list(out.glob("series-*.html"))) == 2


def _unescape(text: str) -> str:
    return (
        text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#x27;", "'")
        .replace("&quot;", '"')
        .replace("&amp;", "&")
        .strip()
    )
