"""The history as a static site (``loadgen-analyze history site``): an ``index.html`` listing
each series — what was tested, its newest values, the gate's status — and one page per series
with its metrics over the runs, the change points, the gate's judgement and each run with a
link to its report.

Every page is self-contained (figures embedded as PNG, no script, no CDN) and links the others
by relative paths only, so the folder can be published as it is (GitHub Pages, an S3 bucket,
opened from disk). What the pages say is found elsewhere: the change points by
:func:`~.changes.change_points`, the judgements by :func:`~.gate.check` and
:func:`~.gate.judge_series` — the same calls ``history show`` and ``history check`` make.
A run's report link is its ``report`` label (``history add --label report=URL``): an
``http(s)://`` URL or a path relative to the site's folder.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from ..report.markup import figure_html, fmt, page
from ..units import count
from .changes import ChangePoint, change_points, series
from .gate import GateResult, Judgement, check, judge_series
from .identity import digest, run_name, series_title
from .trend import METRIC_AXES, plot_trend

#: A series page's file name (see :func:`page_name`).
_SERIES_PAGE = re.compile(r"series-[0-9a-f]+\.html")

#: What the index shows of each series' newest run, when the series has it.
INDEX_METRICS = ("throughput_rps", "p50_ms", "p99_ms", "error_rate", "capacity_rps")

#: A series' status on the index: the worst of its judgements, in this order.
_STATUS_ORDER = ("regression", "within limit", "improvement", "no change", "too few runs")

_SITE_CSS = (
    "<style>.regression{color:#c44e52;font-weight:bold}.improvement{color:#2e7d32}"
    "a{color:#1f4e99}pre{white-space:pre-wrap}</style>"
)


@dataclass(frozen=True)
class SiteSettings:
    """What ``history site`` was asked: metrics drawn, metrics judged, the gate's limit."""

    metrics: tuple[str, ...]
    gated: tuple[str, ...]
    limit: float
    max_pvalue: float


def page_name(fingerprint: str, op: str) -> str:
    """The series page's file name: stable across nights, safe in any URL."""
    return f"series-{digest({'fingerprint': fingerprint, 'op': op})}.html"


def report_link(row: Mapping[str, Any]) -> str | None:
    """The run's ``report`` label when it is a web URL or a path relative to the site, else
    None: a ``javascript:`` or ``file:`` label is never made a link, nor one a browser would
    resolve off-site — ``//host``, ``\\\\host\\x`` (a backslash is a slash to a browser), one
    with a control character or space a browser strips first."""
    text = row.get("labels")
    labels = json.loads(text) if isinstance(text, str) and text else {}
    link = labels.get("report")
    if not isinstance(link, str) or not link:
        return None
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in link):
        return None
    parts = urlsplit(link)
    if parts.scheme in ("http", "https"):
        return link
    relative = not parts.scheme and not parts.netloc and not link.startswith("/")
    return link if relative and "\\" not in link else None


def status_of(judgements: list[Judgement]) -> str:
    """The worst status among ``judgements`` (``not judged`` when there are none)."""
    found = {j.status for j in judgements}
    return next((s for s in _STATUS_ORDER if s in found), "not judged")


def _status_html(status: str) -> str:
    css = status.replace(" ", "-")
    return f"<span class='{css}'>{html.escape(status)}</span>"


def _value(rows: pd.DataFrame, metric: str) -> str:
    values = rows[metric].dropna() if metric in rows else pd.Series(dtype=float)
    if values.empty:
        return "—"
    _, scale = METRIC_AXES.get(metric, (metric, 1.0))
    return fmt(float(values.iloc[-1]) * scale)


def _gate_html(result: GateResult | None, reason: str) -> list[str]:
    if result is None:
        return ["<h2>The gate</h2>", f"<p>{html.escape(reason)}</p>"]
    verdict = "REGRESSION" if result.regressions else "passed"
    return [
        f"<h2>The gate (<code>history check</code>): {_status_html(verdict.lower())}</h2>",
        f"<pre id='gate'>{html.escape(result.to_text())}</pre>",
    ]


def _index(
    history: pd.DataFrame,
    parts: dict[tuple[str, str], pd.DataFrame],
    statuses: dict[tuple[str, str], str],
    gate: tuple[GateResult | None, str],
) -> str:
    shown = [m for m in INDEX_METRICS if m in history and history[m].notna().any()]
    head = "".join(f"<th>{html.escape(METRIC_AXES[m][0])}</th>" for m in shown)
    lines = []
    for (fp, op), rows in parts.items():
        newest = rows.iloc[-1]
        title = html.escape(series_title(newest.to_dict()))
        cells = "".join(f"<td>{_value(rows, m)}</td>" for m in shown)
        lines.append(
            f"<tr><td><a href='{page_name(fp, op)}'>{title}</a></td><td>{html.escape(op)}</td>"
            f"<td>{len(rows)}</td><td>{html.escape(run_name(newest.to_dict()))}</td>{cells}"
            f"<td>{_status_html(statuses[(fp, op)])}</td></tr>"
        )
    table = (
        "<table id='series'><thead><tr><th>series</th><th>op</th><th>runs</th>"
        f"<th>newest run</th>{head}<th>gate</th></tr></thead><tbody>{''.join(lines)}"
        "</tbody></table>"
    )
    runs = count(history["run_id"].nunique(), "run")
    body = [
        _SITE_CSS,
        "<h1>loadgen history</h1>",
        f"<p class='meta'>{runs} in {count(len(parts), 'series', 'series')}; newest values "
        "are the newest run's.</p>",
        table,
        *_gate_html(*gate),
    ]
    return page("loadgen history", body)


def _runs_table(rows: pd.DataFrame, metrics: list[str]) -> str:
    head = "".join(f"<th>{html.escape(METRIC_AXES.get(m, (m,))[0])}</th>" for m in metrics)
    lines = []
    for i, row in enumerate(rows.to_dict("records"), start=1):
        started = pd.Timestamp(int(row["started_unix_ns"]), unit="ns")
        link = report_link(row)
        report = f"<a href='{html.escape(link, quote=True)}'>report</a>" if link else "—"
        commit = row.get("commit") if isinstance(row.get("commit"), str) else ""
        cells = "".join(f"<td>{_value(rows.iloc[i - 1 : i], m)}</td>" for m in metrics)
        lines.append(
            f"<tr><td>{i}</td><td>{started:%Y-%m-%d %H:%M}</td>"
            f"<td>{html.escape(run_name(row))}</td><td>{html.escape(commit)}</td>{cells}"
            f"<td>{report}</td></tr>"
        )
    return (
        "<table id='runs'><thead><tr><th>#</th><th>started (UTC)</th><th>run</th><th>commit</th>"
        f"{head}<th>report</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
    )


def _series_page(rows: pd.DataFrame, judged: list[Judgement], settings: SiteSettings) -> str:
    first = rows.iloc[0].to_dict()
    op = str(first["op"])
    metrics = [m for m in settings.metrics if m in rows and rows[m].notna().any()]
    panels, found = [], []
    for metric in metrics:
        points = change_points(rows, metric, settings.max_pvalue)
        found += points
        caption = f"{metric}: {count(len(points), 'change point')} at p ≤ {settings.max_pvalue:g}"
        panels.append(figure_html(plot_trend(rows, metric, points), caption))
    judgement = "\n".join(j.describe(settings.limit) for j in judged) or "no gated metric"
    body = [
        _SITE_CSS,
        "<p><a href='index.html'>← all series</a></p>",
        f"<h1>{html.escape(series_title(first))}, op {html.escape(op)}</h1>",
        f"<p class='meta'>{count(len(rows), 'run')}; {_what(first)}</p>",
        f"<h2>The gate's judgement: {_status_html(status_of(judged))}</h2>",
        f"<pre id='judgement'>{html.escape(judgement)}</pre>",
        f"<h2>Change points (E-divisive means, p ≤ {settings.max_pvalue:g})</h2>",
        _points_list(found),
        "<h2>Metrics over the runs</h2>",
        *panels,
        "<h2>Runs</h2>",
        _runs_table(rows, metrics),
    ]
    return page(f"loadgen history: {series_title(first)}, op {op}", body)


def _what(first: Mapping[str, Any]) -> str:
    """Scenario, request, model, protocol and version, as the series' key has them."""
    parts = [first["scenario"], first["target"], first["model"], first["protocol"]]
    text = "; ".join(str(p) for p in parts) + f", loadgen {first['loadgen_version']}"
    return html.escape(text)


def _points_list(points: list[ChangePoint]) -> str:
    if not points:
        return "<p>none</p>"
    items = "".join(f"<li>{html.escape(p.describe())}</li>" for p in points)
    return f"<ul id='change-points'>{items}</ul>"


def _gate(history: pd.DataFrame, settings: SiteSettings) -> tuple[GateResult | None, str]:
    try:
        return check(history, settings.limit, settings.gated, None, settings.max_pvalue), ""
    except ValueError as exc:  # nothing to judge: said on the page, as `history check` says it
        return None, str(exc)


def write_site(
    history: pd.DataFrame, out: Path, settings: SiteSettings, ops: tuple[str, ...] | None = None
) -> list[Path]:
    """Write the index and one page per series (of ``ops``, all when None) into ``out``;
    returns the pages written, the index first."""
    parts = {key: rows for key, rows in series(history).items() if ops is None or key[1] in ops}
    if not parts:
        raise ValueError(f"no series has op {', '.join(ops or ())}; leave out --op for all")
    judged = {
        key: judge_series(rows, settings.limit, settings.gated, settings.max_pvalue)
        for key, rows in parts.items()
    }
    statuses = {key: status_of(judgements) for key, judgements in judged.items()}
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(_index(history, parts, statuses, _gate(history, settings)), encoding="utf-8")
    written = [index]
    for (fp, op), rows in parts.items():
        path = out / page_name(fp, op)
        path.write_text(_series_page(rows, judged[(fp, op)], settings), encoding="utf-8")
        written.append(path)
    _remove_stale_pages(out, written)
    return written


def _remove_stale_pages(out: Path, written: list[Path]) -> None:
    """Removes the series pages of an earlier site in ``out`` that this one did not write (a
    series gone from the store, an op left out): published as they are, they would go on
    showing figures the history no longer holds. Only files of this site's naming are
    touched."""
    keep = {p.name for p in written}
    for page_file in out.glob("series-*.html"):
        if page_file.name not in keep and _SERIES_PAGE.fullmatch(page_file.name):
            page_file.unlink()
