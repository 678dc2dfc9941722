"""Self-contained HTML reports: one file, plots embedded as PNG data URIs, no scripts, no
external links, so it can be mailed, attached to a CI job or opened offline.

:func:`build_report` is the run report as named stages (its sections are in :mod:`.sections`,
the HTML building blocks in :mod:`.markup`): run descriptions, the shards of a sharded run,
the per-op summary, the attribution verdict with its evidence, the Little's-Law table and
capacity models when several concurrency levels are given, and the plots.
:func:`build_comparison_report` is the report of the regression gate.
"""

from __future__ import annotations

import html
from pathlib import Path

from ..io.load import RunsArg, as_runs
from ..io.run import Run
from ..reductions.cache import reuse_reductions
from ..reductions.timeline import timeline
from ..regression import Comparison, format_comparison
from ..verdict.attribution import attribute
from . import plots
from .markup import figure_html, page
from .sections import (
    attribution_html,
    distribution_section,
    header_section,
    runs_section,
    summary_section,
    sweep_section,
)


def build_report(
    runs: RunsArg,
    title: str | None = None,
    link_capacity_bps: float | None = None,
) -> str:
    """The HTML text of a report on one run or several (a sweep, repeats)."""
    with reuse_reductions(all_percentiles=True):
        return _build_report(as_runs(runs), title, link_capacity_bps)


def _build_report(runs: list[Run], title: str | None, link_capacity_bps: float | None) -> str:
    # The timeline with its latency first: the verdict's traffic check then reuses its buckets.
    timeline(runs, by_phase=False)
    if title is None:
        title = f"loadgen report: {runs[0].label if len(runs) == 1 else f'{len(runs)} runs'}"
    head = header_section(runs, title) + runs_section(runs)
    result = attribute(runs, link_capacity_bps=link_capacity_bps)
    body = [
        *head,
        "<h2>Where throughput stops</h2>",
        attribution_html(result),
        *summary_section(runs),
        *sweep_section(runs, result),
        *distribution_section(runs),
    ]
    return page(title, body)


def write_report(
    runs: RunsArg,
    out: str | Path,
    title: str | None = None,
    link_capacity_bps: float | None = None,
) -> Path:
    """Write :func:`build_report` to ``out`` (parent folders created) and return its path."""
    out = Path(out)
    text = build_report(runs, title=title, link_capacity_bps=link_capacity_bps)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


def build_comparison_report(
    comparison: Comparison,
    baseline: RunsArg,
    candidate: RunsArg,
) -> str:
    """HTML for the regression gate: the verdict table and baseline overlays."""
    verdict = "PASS" if comparison.passed else "FAIL"
    css = "server" if comparison.passed else "errors"
    body = [
        f"<h1>loadgen regression gate: {verdict}</h1>",
        f"<div class='verdict {css}'><pre>{html.escape(format_comparison(comparison))}</pre></div>",
        figure_html(
            plots.plot_comparison(comparison),
            "Change of each metric with its confidence interval; dashed ticks are the limits.",
        ),
        figure_html(
            plots.plot_percentile_spectrum(candidate, baseline=baseline),
            "Percentile spectrum: baseline dashed, candidate solid.",
        ),
    ]
    return page(f"loadgen regression gate: {verdict}", body)
