"""Figures worth publishing (issue 39): every report kind — run, sweep over N, open-rate sweep,
capacity directory, compare, history — draws its figures with no text outside the figure
(the capacity chart's title was cut mid-word), log axes said to be logarithmic, the spectrum
labelled at each decade of nines; ``--plots DIR`` writes them for every kind and says what it
wrote; ``report --bucket 100ms`` shows a 300 ms stall of a real server that one-second
buckets hide. On the sample runs in ``data/runs`` and one run recorded here."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from loadgen_analysis.history import store, trend
from loadgen_analysis.io.load import load_runs
from loadgen_analysis.regression import compare
from loadgen_analysis.report import plots
from loadgen_analysis.report.capacity import build_capacity_report
from loadgen_analysis.report.html import build_comparison_report, build_report
from loadgen_analysis.report.markup import collect_figures
from loadgen_analysis.testing import harness

from .conftest import Binaries, run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"
REGRESSION = DATA / "regression"
CAPACITY = DATA / "capacity-w8-10ms"


def cut_texts(fig: Figure) -> list[str]:
    """What of ``fig``, once drawn, reaches past its edge: each axes with everything drawn
    around it (title, labels, tick labels in view, its legend), each figure legend and text."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    edge = fig.bbox
    parts = [(f"axes {ax.get_title()!r}", ax.get_tightbbox(renderer)) for ax in fig.axes]
    parts += [("figure legend", legend.get_window_extent(renderer)) for legend in fig.legends]
    parts += [(repr(t.get_text()), t.get_window_extent(renderer)) for t in fig.texts]
    return [
        f"{name} reaches {tuple(round(v) for v in box.extents)} of {tuple(edge.extents)}"
        for name, box in parts
        if box.x0 < edge.x0 - 1
        or box.y0 < edge.y0 - 1
        or box.x1 > edge.x1 + 1
        or box.y1 > edge.y1 + 1
    ]


def log_axes_unsaid(fig: Figure) -> list[str]:
    """The labels of log-scale axes that do not say so."""
    unsaid = []
    for ax in fig.axes:
        for scale, label in (
            (ax.get_yscale(), ax.get_ylabel()),
            (ax.get_xscale(), ax.get_xlabel()),
        ):
            if scale == "log" and "log scale" not in label:
                unsaid.append(label)
    return unsaid


def test_the_check_finds_a_title_cut_at_the_edge() -> None:
    # The capacity chart's title was the answer's first 110 characters at 9 points: cut.
    fig = Figure(figsize=(6, 3), layout="constrained")
    fig.subplots().set_title("sustains 768 req/s (the limit lies between 768 and 816 req/s) " * 3)
    assert cut_texts(fig)
    fine = Figure(figsize=(6, 3), layout="constrained")
    fine.subplots().set_title("Latency vs offered rate")
    assert cut_texts(fine) == []


def _history_page(tmp_path: Path) -> str:
    """The trend report of a store holding the two regression samples."""
    proc = run_cli("history", "add", *REGRESSION.iterdir(), "--store", tmp_path / "store")
    assert proc.returncode == 0, proc.stderr
    history = store.read(str(tmp_path / "store"))
    return trend.build_trend_report(history, ("throughput_rps", "p99_ms"), None, 0.05)


def test_every_report_kind_draws_with_nothing_cut_and_log_axes_said(tmp_path: Path) -> None:
    levels = sorted(CAPACITY.glob("level-*"))
    base, cand = load_runs([REGRESSION / "baseline-5ms"]), load_runs([REGRESSION / "candidate-8ms"])
    builds = {
        "run": lambda: build_report(DATA / "overview"),
        "sweep over N": lambda: build_report(DATA / "sweep-w8-10ms"),
        "open-rate sweep": lambda: build_report(levels),
        "capacity": lambda: build_capacity_report(CAPACITY),
        "compare": lambda: build_comparison_report(compare(base, cand), base, cand),
        "history": lambda: _history_page(tmp_path),
    }
    titles = {}
    for kind, build in builds.items():
        with collect_figures() as figures:
            page = build()
        assert figures, kind
        assert "docs/glossary.md" in page, kind
        for fig, caption in figures:
            assert cut_texts(fig) == [], (kind, caption)
            assert log_axes_unsaid(fig) == [], (kind, caption)
        titles[kind] = [ax.get_title() for fig, _ in figures for ax in fig.axes]
    assert "Open-rate sweep: achieved vs offered rate" in titles["open-rate sweep"]
    assert "Throughput vs concurrency" in titles["sweep over N"]


def test_the_spectrum_labels_its_tail_as_far_as_the_data_reaches() -> None:
    """Issue 61: a run whose tail stopped short of 99 % had "0%" and "90%" only."""
    assert [plots.percentile_label(p) for p in (0, 0.5, 0.995, 0.9995)] == [
        "0%",
        "50%",
        "99.5%",
        "99.95%",
    ]
    for source in (DATA / "overview", DATA / "think-time"):
        fig = plots.plot_percentile_spectrum(source, by_op=False)
        (ax,) = fig.axes
        FigureCanvasAgg(fig).draw()
        ticks = [
            (x, t.get_text()) for x, t in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)
        ]
        labelled = [(x, text) for x, text in ticks if text]
        reached = max(ax.lines[0].get_xdata())  # -log10(1 - p) of the highest drawn
        assert [text for _, text in labelled][:3] == ["0%", "50%", "75%"], labelled
        assert len(labelled) >= 5, labelled
        # The tail is labelled: the last label is within a sixth of a decade of the last point.
        assert labelled[-1][0] >= reached - 0.16, (labelled, reached)
        assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()


def _written(stdout: str, directory: Path) -> list[str]:
    """The figure names ``--plots`` printed, each checked to exist as SVG and PNG."""
    listing = stdout[stdout.index(f" into {directory}, each as .svg and .png:") :]
    names = [line.strip() for line in listing.splitlines()[1:]]
    for name in names:
        assert (directory / f"{name}.svg").is_file() and (directory / f"{name}.png").is_file()
    return names


def test_plots_writes_the_figures_of_a_capacity_directory_compare_and_history(
    tmp_path: Path,
) -> None:
    proc = run_cli("report", CAPACITY, "-o", tmp_path / "c.html", "--plots", tmp_path / "cap")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote 2 figures into {tmp_path / 'cap'}" in proc.stdout, proc.stdout
    assert len(_written(proc.stdout, tmp_path / "cap")) == 2

    args = (REGRESSION / "baseline-5ms", REGRESSION / "candidate-8ms", "--plots", tmp_path / "cmp")
    proc = run_cli("compare", *args)
    assert proc.returncode == 1, proc.stderr  # 5 ms → 8 ms fails the default limits
    assert len(_written(proc.stdout, tmp_path / "cmp")) == 2

    run_cli("history", "add", *REGRESSION.iterdir(), "--store", tmp_path / "store")
    history = ("history", "report", "--store", tmp_path / "store", "-o", tmp_path / "h.html")
    proc = run_cli(*history, "--metric", "p99_ms", "--plots", tmp_path / "hist", "--by-host")
    assert proc.returncode == 0, proc.stderr
    # One p99 panel per series: the baseline and candidate samples, recorded against two
    # servers, are two series by host (one test, one series without --by-host: issue 49).
    names = _written(proc.stdout, tmp_path / "hist")
    assert len(names) == 2 and all("p99" in name for name in names), names


def test_a_bucket_width_that_is_not_one_is_refused() -> None:
    proc = run_cli("report", DATA / "overview", "-o", "/tmp/never.html", "--bucket", "5x")
    assert proc.returncode == 2
    assert "'5x' is not a bucket width; use e.g. 100ms" in proc.stderr


@pytest.fixture(scope="module")
def stalled_run(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 s against a server that stops answering for 300 ms of every second."""
    out = tmp_path_factory.mktemp("stall") / "run"
    stall = ("--service-time", "1ms", "--stall-every", "1s", "--stall-for", "300ms")
    with harness.Server(stall, binary=binaries.server) as server:
        harness.run_loadgen(server.url + "/", out, 4, "2s", binary=binaries.loadgen)
    return out


def _ok_line(run: Path, bucket_s: float) -> list[float]:
    """The ok/s line of the timeline's whole buckets (the partial last one is a marker)."""
    fig = plots.plot_timeline(run, bucket_s=bucket_s)
    return [float(v) for v in fig.axes[0].lines[0].get_ydata()]


def test_a_300ms_stall_shows_in_100ms_buckets_and_not_in_one_second_ones(
    stalled_run: Path, tmp_path: Path
) -> None:
    fine = sorted(_ok_line(stalled_run, 0.1))
    median = fine[len(fine) // 2]
    # 300 ms without an answer hold at least two whole 100 ms buckets with no completion.
    assert fine[0] == fine[1] == 0 and median > 0, fine
    coarse = _ok_line(stalled_run, 1.0)
    # Each second holds one stall: every one-second bucket is about 70 % of the rate.
    assert min(coarse) > 0.5 * max(coarse), coarse
    proc = run_cli("report", stalled_run, "-o", tmp_path / "r.html", "--bucket", "100ms")
    assert proc.returncode == 0, proc.stderr
    assert "p50/p99 latency per 100 ms bucket" in (tmp_path / "r.html").read_text()


def _legend(fig: Figure) -> dict[str, object]:
    (legend,) = fig.legends
    return {
        t.get_text().replace("\n", " "): h
        for t, h in zip(legend.texts, legend.legend_handles, strict=True)
    }


def test_figures_name_levels_by_their_load_and_runs_by_their_target(tmp_path: Path) -> None:
    """Issue 61: a sweep's series were `level-0001`…, the timeline's ok/s and p50 shared one
    glyph, a single run's figures did not say what they measured, and SVG text was paths."""
    levels = sorted((DATA / "sweep-w8-10ms").glob("level-*"))
    legend = _legend(plots.plot_timeline(levels))
    assert [k for k in legend if k.startswith("N=")] == ["N=1", "N=2", "N=4", "N=8", "N=16", "N=32"]
    ok, p50 = legend["ok/s"], legend["p50"]
    assert (ok.get_marker(), ok.get_linestyle()) != (p50.get_marker(), p50.get_linestyle())
    spectrum = plots.plot_percentile_spectrum(levels, by_op=False)
    assert [t.get_text() for t in spectrum.legends[0].texts][:2] == ["N=1", "N=2"]
    rates = _legend(plots.plot_timeline(sorted(CAPACITY.glob("level-*"))[:2]))
    assert all(k.endswith(" req/s") for k in rates if k not in legend), rates

    url = load_runs([DATA / "overview"])[0].meta["config"]["url"]
    fig = plots.plot_timeline(DATA / "overview")
    assert url in fig.axes[0].get_title()
    assert url in plots.plot_percentile_spectrum(DATA / "overview").axes[0].get_title()
    proc = run_cli(
        "report", DATA / "overview", "-o", tmp_path / "r.html", "--plots", tmp_path / "p"
    )
    assert proc.returncode == 0, proc.stderr
    svg = next((tmp_path / "p").glob("*throughput-and-latency*.svg")).read_text()
    assert "Throughput and latency over time" in svg and url in svg, "SVG text drawn as paths"


def test_the_last_partial_bucket_is_off_the_line(tmp_path: Path) -> None:
    """A run's last bucket holds the drain after sending stopped: drawn on the line, its few
    ended requests read as a crash (issue 61). It is a hollow marker, named in the legend."""
    run = load_runs([DATA / "think-time"])[0]  # 1.975 s: its last bucket is 97.5 % inside it
    fig = plots.plot_timeline(run)
    line = fig.axes[0].lines[0]
    wall_s = run.meta["summary"]["wall_time_ns"] / 1e9
    # The line's buckets are whole: the last one's middle is at least half a second before
    # the run's end.
    assert max(line.get_xdata()) <= wall_s - 0.5 + 1e-9, (max(line.get_xdata()), wall_s)
    legend = _legend(fig)
    assert any(k.startswith("last, partial bucket") for k in legend), list(legend)
