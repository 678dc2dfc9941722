"""The trend report of a history store: one panel per series and metric — the runs as points
in time order, each segment's mean between change points, the change points marked with their
size, the newest run highlighted — and a table of the change points, as one HTML page (and,
with ``plots_dir``, each figure as SVG and PNG). Draws what :mod:`.changes` found; finds
nothing itself."""

from __future__ import annotations

import html
from itertools import pairwise
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from ..report.figures import figure, legend_below, set_title
from ..report.markup import figure_html, figures_into, page, table_html
from ..units import count
from .changes import ChangePoint, change_points, series, series_starts, series_table
from .identity import series_title

_POINTS = "#4c72b0"
_WORSE, _BETTER = "#c44e52", "#55a868"


#: Each history metric's axis label, with its unit, and the factor from the stored value.
METRIC_AXES = {
    "throughput_rps": ("throughput (req/s)", 1.0),
    "p50_ms": ("p50 latency (ms)", 1.0),
    "p90_ms": ("p90 latency (ms)", 1.0),
    "p99_ms": ("p99 latency (ms)", 1.0),
    "p999_ms": ("p99.9 latency (ms)", 1.0),
    "error_rate": ("error rate (%)", 100.0),
    "capacity_rps": ("capacity (req/s)", 1.0),
}


def plot_trend(rows: pd.DataFrame, metric: str, points: list[ChangePoint]) -> Figure:
    """One series' ``metric`` by run (oldest left), segment means, change points, newest run;
    the axis in the metric's unit (an error rate in %, from 0), titled by what was tested."""
    label, scale = METRIC_AXES.get(metric, (metric, 1.0))
    present = rows[rows[metric].notna()].reset_index(drop=True)
    values = present[metric].to_numpy(dtype=float) * scale
    positions = list(range(1, len(values) + 1))
    fig, (ax,) = figure(9.0, 3.4)
    ax.plot(positions, values, "o", color=_POINTS, markersize=4, label="run")
    ax.plot(
        positions[-1:],
        values[-1:],
        "o",
        color="black",
        markersize=9,
        mfc="none",
        label="newest run",
    )
    bounds = [0, *(p.index for p in points), len(values)]
    for start, end in pairwise(bounds):
        mean = values[start:end].mean()
        ax.hlines(mean, start + 0.6, end + 0.4, colors="#555", linewidth=1.5)
    for point in points:
        colour = _WORSE if point.worse else _BETTER
        x = point.index + 0.5
        ax.axvline(x, color=colour, linestyle="--", linewidth=1)
        # Inside the frame, just under its top, on the side with room.
        right = x > (len(values) + 1) / 2
        ax.annotate(
            f"{point.change * 100:+.1f}" + (" pts" if metric == "error_rate" else " %"),
            (x, 0.97),
            xycoords=("data", "axes fraction"),
            textcoords="offset points",
            xytext=(-3, 0) if right else (3, 0),
            ha="right" if right else "left",
            va="top",
            color=colour,
            fontsize="small",
            annotation_clip=True,
        )
    # A rate or a count is never below 0: the axis starts there when the data is near it.
    if ax.get_ylim()[0] < 0:
        ax.set_ylim(bottom=0.0)
    what = series_title(present.iloc[0].to_dict())
    set_title(ax, f"{label.split(' (')[0]} — {what}, op {present['op'].iloc[0]}")
    ax.set_xlabel("run (in start-time order)")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    legend_below(fig)
    return fig


def _points_table(points: list[ChangePoint], titles: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "series": titles.get(p.fingerprint, p.fingerprint),
                "first run after": p.name_after or p.run_after,
                "op": p.op,
                "metric": p.metric,
                "run": f"{p.index + 1} of {p.runs}",
                "commit": p.commit_after or "",
                "before": p.mean_before,
                "after": p.mean_after,
                "change %": p.change * 100,
                "p-value": p.pvalue,
                "worse": "yes" if p.worse else "no",
            }
            for p in points
        ]
    )


def build_trend_report(
    history: pd.DataFrame,
    metrics: tuple[str, ...],
    ops: tuple[str, ...] | None,
    max_pvalue: float,
) -> str:
    """The HTML page (module docs)."""
    body = [f"<h1>Trend of {count(history['run_id'].nunique(), 'run')}</h1>"]
    table = series_table(history)
    titles = dict(zip(table["key"], table["series"], strict=True))
    body += ["<h2>Series</h2>", table_html(table)]
    for mark in series_starts(history).to_dict("records"):
        changed = html.escape("; ".join(mark["changed"]))
        run = html.escape(mark["run"])
        body.append(f"<p class='note'>new series from run {run}: {changed}</p>")
    found: list[ChangePoint] = []
    panels = []
    for (_, op), rows in series(history).items():
        if ops is not None and op not in ops:
            continue
        for metric in metrics:
            if metric not in rows or not rows[metric].notna().any():
                continue
            points = change_points(rows, metric, max_pvalue)
            found += points
            caption = f"{metric}: {count(len(points), 'change point')} at p ≤ {max_pvalue:g}"
            panels.append(figure_html(plot_trend(rows, metric, points), caption))
    body += [f"<h2>Change points (E-divisive means, p ≤ {max_pvalue:g})</h2>"]
    body.append(table_html(_points_table(found, titles)) if found else "<p>none</p>")
    body += ["<h2>Metrics over the runs</h2>", *panels]
    return page("loadgen history", body)


def write_trend_report(
    history: pd.DataFrame,
    out: Path,
    metrics: tuple[str, ...],
    ops: tuple[str, ...] | None,
    max_pvalue: float,
    plots_dir: Path | None = None,
) -> Path:
    """Write :func:`build_trend_report` to ``out`` (and its figures into ``plots_dir``)."""
    with figures_into(plots_dir):
        text = build_trend_report(history, metrics, ops, max_pvalue)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
