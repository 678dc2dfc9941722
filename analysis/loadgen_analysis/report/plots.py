"""Plots of runs, sweeps and comparisons. Every function returns a matplotlib Figure.

Responsible for drawing only: the numbers come from summary, littles_law, usl and regression.
Figures are built without pyplot (no global state, never ``plt.show()``), so they work the same
in a notebook, in the HTML report and in a headless test; Jupyter displays a returned Figure.
"""

from __future__ import annotations

import math

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from ..io.load import RunsArg, as_runs
from ..models.bounds import BoundsFit
from ..models.littles_law import Calibration, calibration_from_sweep, predicted_throughput
from ..models.usl import USLFit
from ..reductions.percentiles import SPECTRUM_PERCENTILES, percentile_spectrum
from ..reductions.summary import latency_components
from ..reductions.timeline import phase_spans
from ..reductions.timeline import timeline as timeline_frame
from ..regression import Comparison

_PHASE_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


def _figure(width: float = 9.0, height: float = 4.5, rows: int = 1, sharex: bool = False):
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(rows, 1, sharex=sharex, squeeze=False)[:, 0]
    return fig, axes


def _ms_log_axis(axis) -> None:
    """A log-scale latency axis labelled in plain milliseconds at 1, 2, 3, 5 × 10ⁿ (``0.5``, ``2``,
    ``50``), never ``6×10⁰``."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(LogLocator(base=10, subs=(4.0, 6.0, 7.0, 8.0, 9.0)))
    axis.set_minor_formatter(NullFormatter())


def _outside_legend(ax, entries: int) -> None:
    """The legend to the right of the axes, outside the data."""
    if entries:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _colour(i: int) -> str:
    cycle = mpl.rcParams["axes.prop_cycle"].by_key()["color"]
    return cycle[i % len(cycle)]


def plot_timeline(runs: RunsArg, bucket_s: float = 1.0) -> Figure:
    """Throughput (ok and failed) and p50/p99 latency per time bucket, phases shaded.

    One line per run. Phases are shaded when a run has more than one (the closed model's
    single ``main`` phase is not). Rates are per second of the bucket's part inside its run. A
    bucket less than half inside its run (the sliver after the last whole second: 10.003 s of
    run leave 3 ms in the eleventh bucket) stays off the line — mostly the drain after sending
    stopped, drawn on it it looks like a drop that did not happen (issue 11) — but is drawn as
    a hollow marker at the middle of its part, normalised by its length, so the requests that
    ended there are not missing from the plot (issue 30).
    """
    runs = as_runs(runs)
    everything = timeline_frame(runs, bucket_s=bucket_s, by_phase=False)
    whole = everything[everything["covered_s"] >= bucket_s / 2]
    tl = whole if not whole.empty else everything
    spans = phase_spans(runs)
    fig, (ax_x, ax_r) = _figure(10, 6, rows=2, sharex=True)
    for i, (run, frame) in enumerate(tl.groupby("run", sort=False)):
        colour = _colour(i)
        t = frame["t_s"] + bucket_s / 2
        ax_x.plot(t, frame["ok_throughput_rps"], color=colour, marker=".", label=f"{run} ok")
        _partial_markers(ax_x, everything[everything["run"] == run], bucket_s, colour, run)
        if frame["errors"].any():
            ax_x.plot(
                t,
                frame["errors"] / frame["covered_s"].clip(upper=bucket_s),
                color=colour,
                linestyle=":",
                marker="x",
                label=f"{run} failed",
            )
        ax_r.plot(t, frame["p50_ms"], color=colour, marker=".", label=f"{run} p50")
        ax_r.plot(t, frame["p99_ms"], color=colour, linestyle="--", label=f"{run} p99")
    phases = spans["phase"].unique()
    if len(phases) > 1:
        colours = {p: _PHASE_COLOURS[i % len(_PHASE_COLOURS)] for i, p in enumerate(phases)}
        seen: set[str] = set()
        for row in spans.itertuples(index=False):
            for ax in (ax_x, ax_r):
                ax.axvspan(
                    row.start_s,
                    row.end_s,
                    color=colours[row.phase],
                    alpha=0.12,
                    label=None if row.phase in seen or ax is ax_r else f"phase {row.phase}",
                )
            seen.add(row.phase)
    ax_x.set_ylabel("requests/s")
    ax_x.set_title(f"Throughput and latency over time ({bucket_s:g} s buckets, by completion)")
    ax_x.set_ylim(bottom=0)
    ax_r.set_ylabel("latency (ms)")
    ax_r.set_xlabel("time since start (s)")
    ax_r.set_ylim(bottom=0)
    for ax in (ax_x, ax_r):
        ax.grid(alpha=0.3)
        _outside_legend(ax, 1)
    return fig


def _partial_markers(ax, frame: pd.DataFrame, bucket_s: float, colour: str, run: str) -> None:
    """Hollow markers for a run's buckets kept off the line (less than half inside the run),
    their rate per second of the part inside, at its middle; not joined to the line."""
    partial = frame[(frame["covered_s"] < bucket_s / 2) & (frame["requests"] > 0)]
    if partial.empty:
        return
    ax.plot(
        partial["t_s"] + partial["covered_s"] / 2,
        partial["ok_throughput_rps"],
        color=colour,
        marker="o",
        markerfacecolor="none",
        linestyle="none",
        label=f"{run} partial interval (per second of it)",
    )


def _spectrum_x(p: np.ndarray | float) -> np.ndarray:
    return -np.log10(1.0 - np.asarray(p, dtype=float))


def plot_percentile_spectrum(
    runs: RunsArg | pd.DataFrame,
    baseline: RunsArg | pd.DataFrame | None = None,
    by_op: bool = True,
) -> Figure:
    """Latency against percentile on a log scale of 1/(1−p): the tail spread out.

    ``runs`` may be runs or a
    :func:`~loadgen_analysis.reductions.percentiles.percentile_spectrum` frame. With
    ``baseline``, its curves are overlaid dashed, for before/after comparisons.
    """

    def frame_of(source: RunsArg | pd.DataFrame) -> pd.DataFrame:
        if isinstance(source, pd.DataFrame):
            return source
        return percentile_spectrum(source, SPECTRUM_PERCENTILES, by_op=by_op)

    fig, (ax,) = _figure(10, 4.8)
    series = [("", frame_of(runs), "-")]
    if baseline is not None:
        series = [("baseline ", frame_of(baseline), "--"), ("candidate ", series[0][1], "-")]
    i, top = 0, 0.0
    for prefix, frame, style in series:
        for (run, op), curve in frame.groupby(["run", "op"], sort=False):
            if "supported" in curve:
                curve = curve[curve["supported"]]
            top = max(top, float(curve["percentile"].max()))
            label = f"{prefix}{run}" + (f" {op}" if op != "all" else "")
            ax.plot(
                _spectrum_x(curve["percentile"]),
                curve["latency_ms"],
                linestyle=style,
                marker="o",
                markersize=3,
                color=_colour(i),
                label=label,
            )
            i += 1
    ticks = [q for q in (0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999) if q <= top]
    ax.xaxis.set_major_locator(FixedLocator(_spectrum_x(ticks)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _: f"{100 * (1 - 10 ** (-x)):.5g}%" if x > 0 else "0%")
    )
    ax.set_xlabel("percentile (log scale of 1/(1−p)); shown while n·(1−p) ≥ 10")
    ax.set_ylabel("latency (ms)")
    ax.set_yscale("log")
    _ms_log_axis(ax.yaxis)
    ax.set_title("Latency percentile spectrum")
    ax.grid(alpha=0.3, which="both")
    _outside_legend(ax, i)
    return fig


def plot_throughput_vs_n(
    sweep: pd.DataFrame,
    calibration: Calibration | None = None,
    fit: USLFit | BoundsFit | None = None,
) -> Figure:
    """Observed X(N) against Little's-Law prediction N / R(1) and a capacity model (the USL or
    the operational-law bounds, whichever :func:`attribute` found to fit better), knee marked."""
    if sweep.empty:
        raise ValueError("the sweep has no rows")
    calibration = calibration or calibration_from_sweep(sweep)
    n = sweep["connections"].astype(float)
    x = sweep["throughput_rps"].astype(float)
    fig, (ax,) = _figure(9, 5)
    top = float(n.max())
    if fit is not None and math.isfinite(fit.n_max):
        top = max(top, fit.n_max * 1.1)
    grid = np.linspace(1, top, 400)
    predicted = predicted_throughput(calibration, grid)
    ax.plot(grid, predicted, color="grey", linestyle="--", label="Little's Law: N / R(1)")
    if fit is not None:
        ax.plot(grid, fit.throughput(grid), color="#c44e52", label=f"fit: {fit.label()}")
        if math.isfinite(fit.n_max):
            ax.axvline(fit.n_max, color="#c44e52", linestyle=":", alpha=0.7)
            ax.plot(
                [fit.n_max],
                [fit.x_max],
                marker="*",
                markersize=14,
                color="#c44e52",
                linestyle="none",
                label=f"knee: N={fit.n_max:.3g}, X_max={fit.x_max:,.0f}/s",
            )
    ax.plot(n, x, marker="o", linestyle="none", color="#4c72b0", label="observed X(N)")
    ax.set_ylim(0, max(float(x.max()), fit.x_max if fit and math.isfinite(fit.x_max) else 0) * 1.3)
    ax.set_xlim(0, top * 1.03)
    ax.set_xlabel("concurrency N (workers)")
    ax.set_ylabel("throughput (requests/s)")
    ax.set_title("Throughput vs concurrency")
    ax.grid(alpha=0.3)
    _outside_legend(ax, 1)
    return fig


def plot_latency_vs_n(sweep: pd.DataFrame, fit: USLFit | BoundsFit | None = None) -> Figure:
    """Mean latency R(N) against N, with the model's R(N) = N / X(N) when a fit is given."""
    column = "mean_busy_ms" if "mean_busy_ms" in sweep else "mean_latency_ms"
    n = sweep["connections"].astype(float)
    fig, (ax,) = _figure(9, 4.5)
    ax.plot(n, sweep[column], marker="o", linestyle="none", label="observed mean latency")
    if "p99_ms" in sweep:
        ax.plot(n, sweep["p99_ms"], marker="^", linestyle="none", label="observed p99")
    if fit is not None:
        grid = np.linspace(1, float(n.max()), 300)
        ax.plot(
            grid,
            np.asarray(fit.latency_s(grid)) * 1e3,
            color="#c44e52",
            label=f"{fit.name} N / X(N)",
        )
    ax.set_xlabel("concurrency N (workers)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency vs concurrency")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    _outside_legend(ax, 1)
    return fig


def plot_rate_sweep(levels: pd.DataFrame, knee_rps: float | None = None) -> Figure:
    """An open-rate sweep (:func:`~loadgen_analysis.models.rate_sweep.rate_sweep_table`):
    achieved against offered rate, with the line achieved = offered, and latency (from the
    intended send time) against offered rate; levels that did not keep up hollow, the knee
    (the highest rate kept) a dotted line."""
    offered = levels["offered_rps"].astype(float)
    kept = levels["kept"].astype(bool)
    fig, (ax_x, ax_r) = _figure(9, 7, rows=2, sharex=True)
    top = float(max(offered.max(), levels["achieved_rps"].max())) * 1.05
    ax_x.plot([0, top], [0, top], color="grey", linestyle="--", label="achieved = offered")
    for mask, label, face in ((kept, "kept up", None), (~kept, "did not keep up", "none")):
        ax_x.plot(
            offered[mask],
            levels.loc[mask, "achieved_rps"],
            marker="o",
            markerfacecolor=face,
            linestyle="none",
            color="#4c72b0" if face is None else "#c44e52",
            label=label,
        )
    for column, marker in (("p50_ms", "o"), ("p99_ms", "^")):
        ax_r.plot(offered, levels[column], marker=marker, label=column.replace("_ms", ""))
    if knee_rps is not None:
        for ax in (ax_x, ax_r):
            ax.axvline(knee_rps, color="#c44e52", linestyle=":", label=None)
        ax_x.plot([], [], color="#c44e52", linestyle=":", label=f"knee: {knee_rps:g} req/s kept")
    ax_x.set_xlim(0, top)
    ax_x.set_ylim(0, top)
    ax_x.set_ylabel("achieved (completions/s)")
    ax_x.set_title("Open-rate sweep: achieved against offered rate")
    ax_r.set_yscale("log")
    _ms_log_axis(ax_r.yaxis)
    ax_r.set_xlabel("offered rate (requests/s)")
    ax_r.set_ylabel("latency from intended send (ms)")
    for ax in (ax_x, ax_r):
        ax.grid(alpha=0.3)
        _outside_legend(ax, 1)
    return fig


def plot_n_eff(sweep: pd.DataFrame) -> Figure:
    """Effective concurrency N_eff = X · R̄ against configured N; the diagonal is N_eff = N."""
    if "n_eff" not in sweep:
        raise ValueError("the sweep has no n_eff column (needs mean latency)")
    n = sweep["connections"].astype(float)
    fig, (ax,) = _figure(7, 5)
    top = float(max(n.max(), sweep["n_eff"].max())) * 1.05
    ax.plot([0, top], [0, top], color="grey", linestyle="--", label="N_eff = N")
    ax.plot([0, top], [0, 0.8 * top], color="grey", linestyle=":", label="N_eff = 0.8 N")
    ax.plot(n, sweep["n_eff"], marker="o", linestyle="none", label="observed N_eff = X · R̄")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("configured N (workers)")
    ax.set_ylabel("effective concurrency N_eff")
    ax.set_title("Effective vs configured concurrency")
    ax.grid(alpha=0.3)
    _outside_legend(ax, 1)
    return fig


def plot_latency_components(runs: RunsArg | pd.DataFrame) -> Figure:
    """Mean latency per op split into connect, send (record schema 2), wait for first byte, and
    transfer."""
    frame = runs if isinstance(runs, pd.DataFrame) else latency_components(runs)
    labels = [
        f"{r.run} · {r.op}" if frame["run"].nunique() > 1 else str(r.op)
        for r in frame.itertuples(index=False)
    ]
    fig, (ax,) = _figure(9, 1.2 + 0.45 * max(len(frame), 2))
    y = np.arange(len(frame))
    left = np.zeros(len(frame))
    has_send = "send_ms" in frame and frame["send_ms"].notna().any()
    parts = (
        ("connect_ms", "connect", "#8172b3"),
        *((("send_ms", "send (last request byte to the socket)", "#dd8452"),) if has_send else ()),
        ("first_byte_ms", "sent → first byte" if has_send else "send → first byte", "#4c72b0"),
        ("transfer_ms", "transfer (first → last byte)", "#55a868"),
    )
    for column, label, colour in parts:
        values = np.nan_to_num(frame[column].to_numpy(float))
        ax.barh(y, values, left=left, color=colour, label=label)
        left += values
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("mean latency (ms)")
    ax.set_title("Latency components")
    ax.grid(alpha=0.3, axis="x")
    _outside_legend(ax, 1)
    return fig


def plot_comparison(comparison: Comparison) -> Figure:
    """Change of every metric (candidate vs baseline) with its confidence interval and limit."""
    table = comparison.table[comparison.table["column"] != "error_rate"]
    ops = list(dict.fromkeys(table["op"]))
    fig, axes = _figure(9, 1.0 + 2.4 * len(ops), rows=len(ops))
    for ax, op in zip(axes, ops, strict=True):
        rows = table[table["op"] == op].reset_index(drop=True)
        y = np.arange(len(rows))
        delta = rows["delta"].to_numpy(float) * 100
        low = rows["ci_low"].to_numpy(float) * 100
        high = rows["ci_high"].to_numpy(float) * 100
        colours = ["#c44e52" if v == "fail" else "#4c72b0" for v in rows["verdict"]]
        ax.barh(y, delta, color=colours, alpha=0.8)
        ax.errorbar(
            delta,
            y,
            xerr=[np.nan_to_num(delta - low), np.nan_to_num(high - delta)],
            fmt="none",
            ecolor="black",
            capsize=3,
        )
        for i, r in rows.iterrows():
            if r["limit"] is not None and not pd.isna(r["limit"]):
                edge = -100 * r["limit"] if r["column"] == "throughput_rps" else 100 * r["limit"]
                ax.plot([edge, edge], [i - 0.4, i + 0.4], color="black", linestyle="--")
        ax.axvline(0, color="grey", linewidth=0.8)
        ax.set_yticks(y, rows["metric"])
        ax.invert_yaxis()
        ax.set_xlabel("change vs baseline (%); dashed: limit")
        ax.set_title(f"{op}: candidate vs baseline ({100 * comparison.confidence:g}% CI)")
        ax.grid(alpha=0.3, axis="x")
    return fig
