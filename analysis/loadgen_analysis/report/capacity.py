"""The report of a ``loadgen capacity`` directory: latency from intended time against the
offered rate, every level with its confidence interval, the SLO's line, the answer's
interval shaded, the search's levels in the order run, and the levels as a table.

It draws what ``capacity.json`` (contract ``capacity_json``) says; the judgement of each level
is the engine's, never recomputed here.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..io.capacity import is_capacity_dir, read_capacity
from .figures import figure, legend_below, log_grid, ms_log_yaxis, wrapped
from .markup import figure_html, page, table_html

__all__ = ["build_capacity_report", "is_capacity_dir", "levels_frame", "read_capacity"]


def levels_frame(capacity: dict[str, Any]) -> pd.DataFrame:
    """One row per level: step, offered and achieved rate, p99 from intended (ms) with its
    interval, passed, and why not."""
    rows = []
    for level in capacity["levels"]:
        p99 = next((p for p in level["latency"] if p["quantile"] == 0.99), {})
        ms = {k: (p99.get(k) or float("nan")) / 1e6 for k in ("value_ns", "low_ns", "high_ns")}
        rows.append(
            {
                "step": level["step"],
                "offered_rps": level["offered_rps"],
                "achieved_rps": level["achieved_rps"],
                "p99_ms": ms["value_ns"],
                "p99_low_ms": ms["low_ns"],
                "p99_high_ms": ms["high_ns"],
                "passed": level["passed"],
                "why": "; ".join(level["reasons"]),
            }
        )
    return pd.DataFrame(rows)


def _latency_limits_ms(capacity: dict[str, Any]) -> list[tuple[str, float]]:
    """Each latency SLO's text and limit in ms, from the first level's judgements."""
    if not capacity["levels"]:
        return []
    return [
        (slo["slo"], slo["limit"] / 1e6)
        for slo in capacity["levels"][0]["slos"]
        if slo["unit"] == "ns"
    ]


def plot_capacity(capacity: dict[str, Any]) -> Figure:
    """p99 latency from intended time vs offered rate (log scale), with its interval; passing
    levels green, failing red; the SLO limits dashed; the answer's interval shaded."""
    frame = levels_frame(capacity)
    fig, (ax,) = figure(9, 4.8)
    for passed, colour, label in ((True, "#2e7d32", "passed"), (False, "#c44e52", "failed")):
        part = frame[frame["passed"] == passed]
        if part.empty:
            continue
        errors = [part["p99_ms"] - part["p99_low_ms"], part["p99_high_ms"] - part["p99_ms"]]
        ax.errorbar(
            part["offered_rps"],
            part["p99_ms"],
            yerr=errors,
            fmt="o",
            color=colour,
            capsize=3,
            label=f"level {label} (p99, 95% CI)",
        )
    _say_why(ax, capacity, frame)
    for text, limit_ms in _latency_limits_ms(capacity):
        ax.axhline(limit_ms, color="#444", linestyle="--", linewidth=1, label=f"SLO {text}")
    interval = capacity.get("interval")
    if interval:
        low, high = interval[0], interval[1] if interval[1] is not None else interval[0]
        ax.axvspan(low, max(high, low * 1.001), color="#4c72b0", alpha=0.15, label="answer")
    ax.set_xlabel(f"offered rate (req/s, {capacity['arrivals']} arrivals)")
    ms_log_yaxis(ax, "p99 latency from intended send (ms)")
    ax.set_title(_capacity_title(capacity))
    log_grid(ax)
    legend_below(fig)
    return fig


#: Words of the engine's reasons (capacity.json ``levels[].reasons``) → what a figure's label
#: calls them, first match per reason. The engine judged the level; this only shortens its
#: own sentences for a label (the report's table holds them whole).
_REASON_WORDS = (
    ("dropped", "sends dropped"),
    ("grew", "latency growing"),
    ("below the", "achieved < offered"),
    ("error", "errors"),
    ("crossed", "over the SLO"),
    ("stopped early", "over the SLO"),
)


def short_reasons(reasons: list[str]) -> str:
    """The engine's reasons for a failed level as a short label: ``over the SLO, latency
    growing, sends dropped`` (each said once, in the engine's order); a reason with none of
    the words is kept up to its first colon."""
    said: list[str] = []
    for reason in reasons:
        word = next((short for key, short in _REASON_WORDS if key in reason.lower()), None)
        word = word or reason.split(":")[0][:40]
        if word not in said:
            said.append(word)
    return ", ".join(said)


def _say_why(ax, capacity: dict[str, Any], frame: pd.DataFrame) -> None:
    """Each failed level labelled with why it failed (its reasons in capacity.json), beside
    its point, towards the middle of the figure."""
    middle = (frame["offered_rps"].min() * frame["offered_rps"].max()) ** 0.5
    for level, row in zip(capacity["levels"], frame.to_dict("records"), strict=True):
        if level["passed"] or not level["reasons"]:
            continue
        right = row["offered_rps"] > middle
        ax.annotate(
            wrapped(short_reasons(level["reasons"])),
            (row["offered_rps"], row["p99_ms"]),
            textcoords="offset points",
            xytext=(-8, 0) if right else (8, 0),
            ha="right" if right else "left",
            va="center",
            fontsize=7,
            color="#c44e52",
        )


def _capacity_title(capacity: dict[str, Any]) -> str:
    """Short enough for the figure: the capacity found, not the whole answer (the page's
    verdict box has it)."""
    found = capacity.get("capacity_rps")
    tail = f": sustains {found:,.0f} req/s" if found else ""
    return f"p99 latency vs offered rate{tail}"


def plot_capacity_search(capacity: dict[str, Any]) -> Figure:
    """The search in the order it ran: each level's offered rate (filled; green passed, red
    failed) and achieved rate (hollow), labelled with its step; the answer's interval as a
    band across."""
    frame = levels_frame(capacity)
    fig, (ax,) = figure(9, 4.2)
    order = range(1, len(frame) + 1)
    colours = ["#2e7d32" if passed else "#c44e52" for passed in frame["passed"]]
    ax.plot(order, frame["offered_rps"], color="#999", linewidth=0.8, zorder=1)
    ax.scatter(order, frame["offered_rps"], c=colours, s=40, zorder=2, label="offered")
    ax.scatter(
        order,
        frame["achieved_rps"],
        facecolors="none",
        edgecolors=colours,
        s=90,
        zorder=2,
        label="achieved",
    )
    labels = zip(order, frame["step"], frame["offered_rps"], strict=True)
    for x, step, rate in labels:
        ax.annotate(step, (x, rate), textcoords="offset points", xytext=(0, 8), fontsize=7)
    interval = capacity.get("interval")
    if interval:
        low, high = interval[0], interval[1] if interval[1] is not None else interval[0]
        ax.axhspan(low, max(high, low * 1.001), color="#4c72b0", alpha=0.15, label="answer")
    ax.set_xlabel("level, in the order run")
    ax.set_ylabel("rate (req/s)")
    ax.set_xticks(list(order))
    # Room for the step labels above the highest level and right of the last.
    ax.set_xlim(0.5, len(frame) + 0.9)
    ax.set_ylim(0, float(frame["offered_rps"].max()) * 1.15)
    ax.set_title(f"The search: {len(frame)} levels in {capacity['elapsed_s']:.0f} s")
    ax.grid(alpha=0.3)
    legend_below(fig)
    return fig


def build_capacity_report(path: str | Path, title: str | None = None) -> str:
    """The HTML text of the report on a capacity directory."""
    capacity = read_capacity(path)
    title = title or f"loadgen capacity: {Path(path).name}"
    limited_by = capacity.get("limited_by") or "none"
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<div class='verdict {html.escape(limited_by)}'><b>{html.escape(capacity['answer'])}"
        f"</b><br>stops at: {html.escape(limited_by)} — "
        f"{html.escape('; '.join(capacity['evidence']))}</div>",
        *[f"<p class='note'>warning: {html.escape(w)}</p>" for w in capacity["warnings"]],
    ]
    if not capacity["levels"]:
        # A search cut short before its first level (Ctrl-C during the calibration): the
        # answer says why; there is nothing to draw.
        body.append("<p>No level ran, so there is nothing to draw.</p>")
        return page(title, body)
    body += [
        figure_html(plot_capacity(capacity), "Latency from intended send vs offered rate."),
        figure_html(plot_capacity_search(capacity), "The search, level by level."),
        "<h2>Levels, in the order run</h2>",
        table_html(levels_frame(capacity)),
    ]
    return page(title, body)
