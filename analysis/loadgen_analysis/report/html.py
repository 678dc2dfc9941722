"""Self-contained HTML reports: one file, plots embedded as PNG data URIs, no scripts, no
external links, so it can be mailed, attached to a CI job or opened offline.

:func:`build_report` is the run report as named stages (its sections are in :mod:`.sections`,
the HTML building blocks in :mod:`.markup`): run descriptions, the shards of a sharded run,
the per-op summary, the attribution verdict with its evidence, the sweep (:mod:`.sweeps`:
over N, or over the offered rate for open-model runs), and the plots.
:func:`build_comparison_report` is the report of the regression gate.
"""

from __future__ import annotations

import html
from pathlib import Path

from ..io.load import RunsArg, as_runs
from ..io.run import Run
from ..reductions.cache import reuse_reductions
from ..regression import Comparison, format_comparison, formatted_cells
from ..verdict.attribution import attribute
from . import plots
from .markup import figure_html, figures_into, page
from .sections import (
    attribution_html,
    distribution_section,
    header_section,
    open_model_section,
    runs_section,
    summary_section,
    traces_section,
)
from .sweeps import sweep_section


def build_report(runs: RunsArg, title: str | None = None, bucket_s: float = 1.0) -> str:
    """The HTML text of a report on one run or several (a sweep, repeats); ``bucket_s`` is
    the timeline's bucket width. The verdict is the engine's for one run (run.json)."""
    with reuse_reductions(all_percentiles=True):
        return _build_report(as_runs(runs), title, bucket_s)


def _build_report(runs: list[Run], title: str | None, bucket_s: float) -> str:
    if title is None:
        title = f"loadgen report: {runs[0].label if len(runs) == 1 else f'{len(runs)} runs'}"
    head = header_section(runs, title) + runs_section(runs)
    result = attribute(runs)
    body = [
        *head,
        "<h2>Where throughput stops</h2>",
        attribution_html(result),
        *summary_section(runs),
        *traces_section(runs),
        *open_model_section(runs),
        *sweep_section(runs, result),
        *distribution_section(runs, bucket_s),
    ]
    return page(title, body)


def write_report(
    runs: RunsArg,
    out: str | Path,
    title: str | None = None,
    plots_dir: str | Path | None = None,
    bucket_s: float = 1.0,
) -> Path:
    """Write :func:`build_report` to ``out`` (parent folders created) and return its path;
    with ``plots_dir``, also each of its figures as SVG and PNG there (for papers and slides)."""
    out = Path(out)
    with figures_into(None if plots_dir is None else Path(plots_dir)):
        text = build_report(runs, title, bucket_s)
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
        f"<div class='verdict {css}'>{html.escape(_verdict_line(comparison))}</div>",
        f"<p class='meta'>baseline: {html.escape(', '.join(comparison.baseline))}<br>"
        f"candidate: {html.escape(', '.join(comparison.candidate))}<br>"
        f"CI {100 * comparison.confidence:g}%: {html.escape(comparison.method)}</p>",
        *(f"<p class='note'>warning: {html.escape(w)}</p>" for w in comparison.warnings),
        comparison_table_html(comparison),
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


def _verdict_line(comparison: Comparison) -> str:
    """The last line of ``compare``'s text: PASS, or FAIL and what exceeded its limit."""
    return format_comparison(comparison).splitlines()[-1]


def comparison_table_html(comparison: Comparison) -> str:
    """``compare``'s table as HTML: one row per op and metric, failures marked."""
    rows = []
    for r in comparison.table.itertuples(index=False):
        # A change it cannot tell from noise fails the gate too (more runs per side).
        css = " class='status-limit'" if r.verdict in ("fail", "noisy") else ""
        text = formatted_cells(r)
        cells = [
            r.op,
            r.metric,
            *(text[k] for k in ("baseline", "candidate", "delta", "ci", "limit")),
        ]
        tds = "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
        rows.append(f"<tr{css}>{tds}<td>{html.escape(r.verdict.upper())}</td></tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in ("op", "metric", "baseline", "candidate", "Δ", "CI of Δ", "limit", "verdict")
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
