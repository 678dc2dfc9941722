"""The timeline figure: throughput and latency per time bucket, and, under them, the server's
panels (its CPU, its saturation gauges) when the runs were recorded with ``--server-metrics``.

The bucket width is the caller's (``report --bucket``): one second by default, finer to see a
stall shorter than a second, which a one-second bucket averages away. One legend to the
right: colour is the run, line style the measure, so a sweep of six runs needs six colour
entries and a few style entries, not one entry per line.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..io.load import RunsArg, as_runs
from ..reductions.timeline import phase_spans
from ..reductions.timeline import timeline as timeline_frame
from .figures import colour, figure, legend_right
from .run_names import figure_names, target_of
from .server_plots import draw_cpu, draw_saturation, server_series

_PHASE_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
_GREY = "#555"


def bucket_text(bucket_s: float) -> str:
    """``1 s``, ``100 ms``: a bucket width as a person writes it."""
    return f"{bucket_s:g} s" if bucket_s >= 1 else f"{bucket_s * 1000:g} ms"


def plot_timeline(runs: RunsArg, bucket_s: float = 1.0) -> Figure:
    """Throughput (ok and failed) and p50/p99 latency per time bucket, phases shaded; under
    them the target's CPU and the service's saturation gauges when the runs have
    ``server-metrics.parquet`` with those metrics.

    One colour per run. Phases are shaded when a run has more than one (the closed model's
    single ``main`` phase is not). Rates are per second of the bucket's part inside its run. A
    bucket less than half inside its run (the sliver after the last whole second: 10.003 s of
    run leave 3 ms in the eleventh bucket), and a run's last bucket when it is not whole, stay
    off the line — mostly the drain after sending
    stopped, drawn on it it looks like a drop that did not happen (issue 11) — but is drawn as
    a hollow marker at the middle of its part, normalised by its length, so the requests that
    ended there are not missing from the plot (issue 30).
    """
    runs = as_runs(runs)
    everything = _with_empty_buckets(
        timeline_frame(runs, bucket_s=bucket_s, by_phase=False), bucket_s
    )
    partial = _partial(everything, bucket_s)
    whole = everything[~partial]
    tl = whole if not whole.empty else everything
    everything = everything.assign(partial=partial)
    server = server_series(runs)
    rows = 2 + server.panels
    fig, axes = figure(10, 6 + 2.2 * server.panels, rows=rows, sharex=True)
    ax_x, ax_r = axes[0], axes[1]
    styles: dict[str, Line2D] = {}
    for i, (run, frame) in enumerate(tl.groupby("run", sort=False)):
        _draw_run(ax_x, ax_r, frame, everything[everything["run"] == run], bucket_s, i, styles)
    phases = _shade_phases(phase_spans(runs), axes)
    ax_x.set_ylabel("requests/s")
    target = target_of(runs)
    ax_x.set_title(
        f"Throughput and latency over time ({bucket_text(bucket_s)} buckets)"
        + (f"\nagainst {target}" if target else "")
    )
    ax_x.set_ylim(bottom=0)
    ax_r.set_ylabel("latency (ms)")
    ax_r.set_ylim(bottom=0)
    panel = 2
    if not server.cpu.empty:
        draw_cpu(axes[panel], server.cpu, runs)
        panel += 1
    if not server.saturation.empty:
        draw_saturation(axes[panel], server.saturation, runs)
    axes[-1].set_xlabel("time since start (s); requests counted when they ended")
    for ax in axes:
        ax.grid(alpha=0.3)
    names = figure_names(runs)
    _legend(fig, [names.get(run, str(run)) for run in tl["run"].unique()], styles, phases, axes[2:])
    return fig


def _partial(frame: pd.DataFrame, bucket_s: float) -> pd.Series:
    """The buckets off the line: less than half inside their run, and each run's last bucket
    when it is not whole — it holds the drain after sending stopped (the requests still in
    flight ending one by one), whose few ended requests would draw a drop to near 0 that reads
    as a crash (issue 61)."""
    last = frame.groupby("run", sort=False)["t_s"].transform("max") == frame["t_s"]
    return (frame["covered_s"] < bucket_s / 2) | (last & (frame["covered_s"] < bucket_s * 0.999))


def _with_empty_buckets(frame: pd.DataFrame, bucket_s: float) -> pd.DataFrame:
    """The timeline with a row of zero requests for each bucket inside a run in which none
    ended (a stall), so the line drops to zero there instead of jumping across the gap."""
    filled = []
    for run, part in frame.groupby("run", sort=False):
        index = (part["t_s"] / bucket_s).round().astype(int)
        every = range(int(index.min()), int(index.max()) + 1)
        part = part.set_axis(index).reindex(every)
        zero = ["requests", "ok", "errors", "throughput_rps", "ok_throughput_rps"]
        part[zero] = part[zero].fillna(0)
        part["covered_s"] = part["covered_s"].fillna(bucket_s)
        part["t_s"] = [i * bucket_s for i in every]
        filled.append(part.assign(run=run, phase=part["phase"].ffill()))
    return pd.concat(filled, ignore_index=True) if filled else frame


def _draw_run(ax_x, ax_r, frame, everything, bucket_s, i, styles) -> None:
    """One run's lines, in its colour; the styles it used are noted in ``styles``."""
    c = colour(i)
    t = frame["t_s"] + bucket_s / 2
    ax_x.plot(t, frame["ok_throughput_rps"], color=c, marker=".")
    styles.setdefault("ok/s", Line2D([], [], color=_GREY, marker="."))
    partial = everything[everything["partial"] & (everything["requests"] > 0)]
    if not partial.empty:
        ax_x.plot(
            partial["t_s"] + partial["covered_s"] / 2,
            partial["ok_throughput_rps"],
            color=c,
            marker="o",
            markerfacecolor="none",
            linestyle="none",
        )
        styles.setdefault(
            "last, partial bucket: ok/s of its part (the drain), off the line",
            Line2D([], [], color=_GREY, marker="o", markerfacecolor="none", linestyle="none"),
        )
    if frame["errors"].any():
        failed = frame["errors"] / frame["covered_s"].clip(upper=bucket_s)
        ax_x.plot(t, failed, color=c, linestyle=":", marker="x")
        styles.setdefault("failed/s", Line2D([], [], color=_GREY, linestyle=":", marker="x"))
    # p50's glyph differs from ok/s's: one legend holds both panels' measures.
    ax_r.plot(t, frame["p50_ms"], color=c, marker="^", markersize=4)
    ax_r.plot(t, frame["p99_ms"], color=c, linestyle="--")
    styles.setdefault("p50", Line2D([], [], color=_GREY, marker="^", markersize=4))
    styles.setdefault("p99", Line2D([], [], color=_GREY, linestyle="--"))


def _shade_phases(spans: pd.DataFrame, axes) -> dict[str, Patch]:
    """Each phase shaded on every panel when there is more than one; their legend patches."""
    phases = list(spans["phase"].unique())
    if len(phases) <= 1:
        return {}
    colours = {p: _PHASE_COLOURS[i % len(_PHASE_COLOURS)] for i, p in enumerate(phases)}
    for row in spans.itertuples(index=False):
        for ax in axes:
            ax.axvspan(row.start_s, row.end_s, color=colours[row.phase], alpha=0.12)
    return {f"phase {p}": Patch(color=colours[p], alpha=0.3) for p in phases}


def _legend(fig, runs: list[str], styles, phases, server_axes) -> None:
    """Runs by colour (when more than one), the measures by style, the phases, the server's
    lines."""
    handles, labels = [], []
    if len(runs) > 1:
        handles += [Line2D([], [], color=colour(i), linewidth=4) for i in range(len(runs))]
        labels += runs
    for entries in (styles, phases):
        handles += list(entries.values())
        labels += list(entries)
    for ax in server_axes:
        more_handles, more_labels = ax.get_legend_handles_labels()
        handles += more_handles
        labels += more_labels
    legend_right(fig, handles, labels)
