"""``loadgen run --dashboard`` and ``loadgen capacity --dashboard``: the live page in headless
Chromium during a real run and a real capacity search against loadgen-server, and the page
saved with ``--dashboard-out`` opened with no network.

Chromium's ``--dump-dom`` prints the page once its virtual-time budget is spent; the page
keeps the request counts it was sent in ``#seen`` and its state in ``body[data-state]``, so
the dump says whether the numbers moved and whether the final figures arrived. Skipped, with
the reason, where no Chromium is installed (as test_report_browser.py).
"""

from __future__ import annotations

import html
import itertools
import json
import re
import subprocess
from pathlib import Path

from loadgen_analysis.testing import harness

from .conftest import Binaries
from .test_report_browser import _chromium

#: A proxy nobody listens on: a page that fetched anything from the network would fail.
NO_NETWORK = "--proxy-server=127.0.0.1:9"


def _dump(url: str, *flags: str) -> str:
    command = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", *flags]
    command += ["--virtual-time-budget=8000", "--dump-dom", url]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert "<body" in proc.stdout, f"chromium printed no page:\n{proc.stderr[-2000:]}"
    return proc.stdout


def _figures(dom: str) -> dict:
    state = re.search(r'<body data-state="([a-z]+)"', dom)
    seen = re.search(r'<pre id="seen"[^>]*>(.*?)</pre>', dom, re.S)
    requests = re.search(r'id="requests">(\d+)<', dom)
    return {
        "state": state and state.group(1),
        "seen": json.loads(seen.group(1)) if seen and seen.group(1) else [],
        "requests": int(requests.group(1)) if requests else None,
        "charts": dom.count("<canvas"),
    }


def test_the_live_page_moves_and_ends_on_run_jsons_figures(binaries: Binaries, tmp_path: Path):
    out, page = tmp_path / "run", tmp_path / "page.html"
    with harness.Server(("--service-time", "2ms"), binary=binaries.server) as server:
        process = subprocess.Popen(
            [
                str(binaries.loadgen),
                "run",
                "--url",
                server.url + "/",
                "-c",
                "2",
                "-d",
                "4s",
                "--no-progress",
                "--dashboard",
                "--dashboard-linger",
                "2s",
                "--dashboard-out",
                str(page),
                "--out",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = None
            for line in process.stderr:
                if match := re.search(r"dashboard at (http://\S+/)", line):
                    url = match.group(1)
                    break
            assert url, "loadgen did not say where its dashboard is"
            live = _figures(_dump(url))
        finally:
            rest = process.communicate(timeout=60)[1]
    assert process.returncode == 0, rest
    run = json.loads((out / "run.json").read_text())
    seen = live["seen"]
    assert len(seen) >= 2 and all(a < b for a, b in itertools.pairwise(seen)), live
    assert live["state"] == "final", live
    assert live["requests"] == run["summary"]["requests"], live
    assert live["charts"] >= 2, live

    # The saved page, with every network fetch bound to fail: the same final figures, charts.
    saved = _figures(_dump(page.as_uri(), NO_NETWORK))
    assert saved["state"] == "final", saved
    assert saved["requests"] == run["summary"]["requests"], saved
    assert len(saved["seen"]) >= len(seen), saved
    assert saved["charts"] >= 2, saved


def _levels(dom: str) -> dict:
    seen = re.search(r'<pre id="levels_seen"[^>]*>(.*?)</pre>', dom, re.S)
    capacity = re.search(r'id="capacity_rps">([^<]*)<', dom)
    return {
        "rows": dom.count('<tr class="level">'),
        "seen": json.loads(seen.group(1)) if seen and seen.group(1) else [],
        "capacity_rps": capacity and capacity.group(1),
    }


def test_a_capacity_searchs_levels_appear_as_they_finish_and_end_on_capacity_json(
    binaries: Binaries, tmp_path: Path
):
    out, page = tmp_path / "capacity", tmp_path / "capacity.html"
    server_args = ("--service-time", "10ms", "--workers", "2")
    with harness.Server(server_args, binary=binaries.server) as server:
        process = subprocess.Popen(
            [
                str(binaries.loadgen),
                "capacity",
                "--url",
                server.url + "/albums/1",
                "--slo",
                "p99<50ms",
                "--start-rate",
                "100",
                "--level-duration",
                "1500ms",
                "--warmup",
                "300ms",
                "--cool-down",
                "0s",
                "--tolerance",
                "50%",
                "--confirm-levels",
                "1",
                "--budget",
                "10s",
                "--allow-unconverged",
                "--no-progress",
                "--dashboard",
                "--dashboard-linger",
                "3s",
                "--dashboard-out",
                str(page),
                "--out",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = None
            for line in process.stderr:
                if match := re.search(r"dashboard at (http://\S+/)", line):
                    url = match.group(1)
                    break
            assert url, "loadgen did not say where its dashboard is"
            dom = _dump(url)
        finally:
            rest = process.communicate(timeout=90)[1]
    assert process.returncode in (0, 99), rest
    capacity = json.loads((out / "capacity.json").read_text())
    levels = len(capacity["levels"])
    assert levels >= 2, capacity

    live, figures = _levels(dom), _figures(dom)
    assert figures["state"] == "final", figures
    # Every level is a row, and each arrived as it finished: seconds of the search came
    # between one level and the next.
    assert live["rows"] == levels, live
    assert len(live["seen"]) == levels, live
    assert all(a < b for a, b in itertools.pairwise(live["seen"])), live
    found = capacity["capacity_rps"]
    assert live["capacity_rps"] == ("none" if found is None else f"{found:.1f}"), live

    # The saved page, with no network: the same levels and answer.
    saved = _levels(_dump(page.as_uri(), NO_NETWORK))
    assert saved["rows"] == levels, saved
    assert saved["capacity_rps"] == live["capacity_rps"], saved


#: Read from the saved page once it drew: the latency chart's title, the slowest table, and
#: whether each chart's y axis is as wide as its tick labels at a rate of 45,000 req/s and
#: 1.2 M req/s (uPlot's default 50 px showed "45,000" as "5,000", issue 61).
_PAGE_PROBE = """
<script>
window.addEventListener("load", async () => {
  const drawn = () => new Promise((resolve) => setTimeout(resolve, 100));
  // uPlot sizes its axes when it commits new data, after this task: wait for it.
  const fits = async (u, values) => {
    u.setData([values.map((_, i) => i), ...u.data.slice(1).map(() => values)]);
    await drawn();
    const a = u.axes[1];
    u.ctx.font = a.font[0];
    const widest = Math.max(...a._values.map((v) => u.ctx.measureText(String(v)).width));
    const need = widest / devicePixelRatio + a.gap + (a.ticks.show ? a.ticks.size : 0);
    return { labels: a._values, need, size: a._size };
  };
  const slowest = [...document.querySelectorAll("#slowest tr")].slice(1)
    .map((r) => parseFloat(r.children[1].textContent));
  const found = {
    latency_title: document.querySelector("#latency_chart .u-title").textContent,
    slowest_title: document.getElementById("slowest_title").textContent,
    slowest,
    rps: [await fits(charts.rps, [45000, 23000, 31000]), await fits(charts.rps, [1200000, 900000])],
    latency: await fits(charts.latency, [15000.5, 12000.25]),
  };
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>
"""


def _page_probe(page: Path) -> dict:
    probed = page.with_name(f"probed-{page.name}")
    probed.write_text(page.read_text().replace("</body>", _PAGE_PROBE + "</body>"))
    dom = _dump(probed.as_uri(), NO_NETWORK)
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the page printed no probe"
    return json.loads(html.unescape(found.group(1)))


def test_the_saved_page_agrees_with_run_json_and_labels_its_axes(
    binaries: Binaries, tmp_path: Path
) -> None:
    """Issue 61: the slowest table's first row is the run's max (it lagged the rows by the
    page's last update), the latency chart's title says the open model's intended send only
    on an open run, and the axes' labels fit at any rate."""
    _chromium()
    runs = {
        "closed": ("-c", "2", "-n", "400"),
        "open": ("--rate", "200", "-d", "1s"),
    }
    with harness.Server(("--service-time", "2ms"), binary=binaries.server) as server:
        for model, flags in runs.items():
            out, page = tmp_path / model, tmp_path / f"{model}.html"
            done = subprocess.run(
                [
                    str(binaries.loadgen),
                    "run",
                    "--url",
                    server.url + "/",
                    *flags,
                    "--no-probe",
                    "--no-progress",
                    "--dashboard-out",
                    str(page),
                    "--out",
                    str(out),
                ],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            run = json.loads((out / "run.json").read_text())
            found = _page_probe(page)
            max_ms = max(op["latency"]["max_ns"] for op in run["summary"]["ops"]) / 1e6
            # The table's first row is the exact latency; max_ns is HDR's (3 digits).
            assert found["slowest"], found
            assert abs(found["slowest"][0] - max_ms) <= max(0.011, max_ms * 0.002), (found, max_ms)
            assert found["slowest_title"].startswith("Slowest responses of the run"), found
            intended = "intended send" in found["latency_title"]
            assert intended == (model == "open"), found["latency_title"]
            for axis in (*found["rps"], found["latency"]):
                assert axis["need"] <= axis["size"], axis
            digits = [len(re.sub(r"\D", "", str(label))) for label in found["rps"][0]["labels"]]
            assert max(digits) >= 5, found["rps"][0]  # tens of thousands, drawn whole
