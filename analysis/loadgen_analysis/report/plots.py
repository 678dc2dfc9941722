"""Plots of runs, sweeps and comparisons. Every function returns a matplotlib Figure.

Responsible for drawing only: the numbers come from summary, littles_law, usl and regression.
Figures are built without pyplot (no global state, never ``plt.show()``), so they work the same
in a notebook, in the HTML report and in a headless test; Jupyter displays a returned Figure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..io.load import RunsArg
from ..models.bounds import BoundsFit
from ..models.littles_law import Calibration, calibration_from_sweep, predicted_throughput
from ..models.usl import USLFit
from ..reductions.percentiles import SPECTRUM_PERCENTILES, percentile_spectrum
from ..reductions.summary import latency_components
from ..regression import Comparison
from .figures import colour, figure, legend_below, log_grid, ms_log_yaxis, set_title
from .run_names import figure_names, target_of
from .timeline_plot import plot_timeline

__all__ = [
    "plot_comparison",
    "plot_latency_components",
    "plot_latency_vs_n",
    "plot_n_eff",
    "plot_percentile_spectrum",
    "plot_rate_sweep",
    "plot_throughput_vs_n",
    "plot_timeline",
]


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

    fig, (ax,) = figure(10, 4.8)
    names = {} if isinstance(runs, pd.DataFrame) else figure_names(runs)
    if baseline is not None and not isinstance(baseline, pd.DataFrame):
        names = {**figure_names(baseline), **names}
    series = [("", frame_of(runs), "-")]
    if baseline is not None:
        series = [("baseline ", frame_of(baseline), "--"), ("candidate ", series[0][1], "-")]
    i, top = 0, 0.0
    for prefix, frame, style in series:
        one_run = baseline is None and frame["run"].nunique() == 1
        one_op = frame["op"].nunique() == 1  # then the op is the caption's, not each line's
        for (run, op), curve in frame.groupby(["run", "op"], sort=False):
            if "supported" in curve:
                curve = curve[curve["supported"]]
            top = max(top, float(curve["percentile"].max()))
            name = f"{prefix}{names.get(run, run)}" + (
                f" {op}" if op != "all" and not one_op else ""
            )
            ax.plot(
                _spectrum_x(curve["percentile"]),
                curve["latency_ms"],
                linestyle=style,
                marker="o",
                markersize=3,
                color=colour(i),
                label=str(op) if one_run and op != "all" else name,
            )
            i += 1
    _nines_axis(ax.xaxis, top)
    ax.set_xlabel("percentile (spaced by 1/(1−p), log scale); shown while n·(1−p) ≥ 10")
    ms_log_yaxis(ax, "latency (ms)")
    target = None if isinstance(runs, pd.DataFrame) else target_of(runs)
    set_title(ax, "Latency percentile spectrum" + (f" — {target}" if target else ""))
    log_grid(ax)
    legend_below(fig)
    return fig


#: Where a spectrum's percentile axis is labelled, as far as the data reaches: the decades of
#: nines and the halves between them, so a run whose tail stops short of the next decade
#: (p99.5) still has its tail labelled (issue 61: "0%" and "90%" only).
_SPECTRUM_TICKS = (0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 0.999999)


def percentile_label(p: float) -> str:
    """``50%``, ``99.5%``, ``99.95%``: a percentile as people write it."""
    return f"{p * 100:.6g}%"


def _nines_axis(axis, top: float) -> None:
    """A spectrum's percentile axis labelled at the decades of nines and the halves between
    them that the data reaches (0 %, 50 %, 90 %, 95 %, 99 %, 99.5 %, …), and at the highest
    percentile drawn when it lies past the last of those."""
    top = min(top, 1 - 1e-12)
    ticks = [p for p in _SPECTRUM_TICKS if p <= top + 1e-12]
    if float(_spectrum_x(top)) - float(_spectrum_x(ticks[-1])) > 0.15:
        ticks.append(top)
    axis.set_major_locator(FixedLocator([float(_spectrum_x(p)) for p in ticks]))
    labels = {round(float(_spectrum_x(p)), 9): percentile_label(p) for p in ticks}
    axis.set_major_formatter(FuncFormatter(lambda x, _: labels.get(round(x, 9), "")))
    axis.set_minor_locator(NullLocator())


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
    fig, (ax,) = figure(9, 5)
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
    legend_below(fig)
    return fig


def plot_latency_vs_n(sweep: pd.DataFrame, fit: USLFit | BoundsFit | None = None) -> Figure:
    """Mean latency R(N) against N, with the model's R(N) = N / X(N) when a fit is given."""
    column = "mean_busy_ms" if "mean_busy_ms" in sweep else "mean_latency_ms"
    n = sweep["connections"].astype(float)
    fig, (ax,) = figure(9, 4.5)
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
    legend_below(fig)
    return fig


def plot_rate_sweep(levels: pd.DataFrame, knee_rps: float | None = None) -> Figure:
    """An open-rate sweep (:func:`~loadgen_analysis.models.rate_sweep.rate_sweep_table`):
    achieved against offered rate, with the line achieved = offered, and latency (from the
    intended send time) against offered rate; levels that did not keep up hollow, the knee
    (the highest rate kept) a dotted line."""
    offered = levels["offered_rps"].astype(float)
    kept = levels["kept"].astype(bool)
    fig, (ax_x, ax_r) = figure(9, 7, rows=2, sharex=True)
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
    ax_x.set_title("Open-rate sweep: achieved vs offered rate")
    ms_log_yaxis(ax_r, "latency from intended send (ms)")
    ax_r.set_xlabel("offered rate (requests/s)")
    for ax in (ax_x, ax_r):
        ax.grid(alpha=0.3)
    legend_below(fig)
    return fig


def plot_n_eff(sweep: pd.DataFrame) -> Figure:
    """Effective concurrency N_eff = X · R̄ against configured N; the diagonal is N_eff = N."""
    if "n_eff" not in sweep:
        raise ValueError("the sweep has no n_eff column (needs mean latency)")
    n = sweep["connections"].astype(float)
    fig, (ax,) = figure(7, 5)
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
    legend_below(fig)
    return fig


def plot_latency_components(runs: RunsArg | pd.DataFrame) -> Figure:
    """Mean latency per op split into connect, send (record schema 2), wait for first byte, and
    transfer."""
    frame = runs if isinstance(runs, pd.DataFrame) else latency_components(runs)
    labels = [
        f"{r.run} · {r.op}" if frame["run"].nunique() > 1 else str(r.op)
        for r in frame.itertuples(index=False)
    ]
    fig, (ax,) = figure(9, 1.2 + 0.45 * max(len(frame), 2))
    y = np.arange(len(frame))
    left = np.zeros(len(frame))
    has_send = "send_ms" in frame and frame["send_ms"].notna().any()
    parts = (
        ("connect_ms", "connect", "#8172b3"),
        *((("send_ms", "send (last request byte to the socket)", "#dd8452"),) if has_send else ()),
        ("first_byte_ms", "sent → first byte" if has_send else "send → first byte", "#4c72b0"),
        ("transfer_ms", "transfer (first → last byte)", "#55a868"),
    )
    for column, label, shade in parts:
        values = np.nan_to_num(frame[column].to_numpy(float))
        ax.barh(y, values, left=left, color=shade, label=label)
        left += values
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("mean latency (ms)")
    ax.set_title("Latency components")
    ax.grid(alpha=0.3, axis="x")
    legend_below(fig)
    return fig


def plot_comparison(comparison: Comparison) -> Figure:
    """Change of every metric (candidate vs baseline) with its confidence interval and limit."""
    table = comparison.table[comparison.table["column"] != "error_rate"]
    ops = list(dict.fromkeys(table["op"]))
    fig, axes = figure(9, 1.0 + 2.4 * len(ops), rows=len(ops))
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
        set_title(ax, f"{op}: candidate vs baseline ({100 * comparison.confidence:g}% CI)")
        ax.grid(alpha=0.3, axis="x")
    return fig
