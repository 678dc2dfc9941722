"""The sections of a run report, in the order the page shows them: header, runs (with shards
and thresholds), the verdict, the summary per op (with failures and checks) and the
distributions over time; the sweep's sections are in :mod:`.sweeps`.

Each section takes runs or a computed result and returns its HTML parts; it lays out what the
other subpackages compute and computes nothing of its own.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from importlib.metadata import PackageNotFoundError, version

import pandas as pd

from ..io.engine import WARMUP_PHASE
from ..io.run import Run
from ..reductions.checks import check_failures, checks_evaluated, skipped_requests
from ..reductions.open_model import open_model_table
from ..reductions.summary import error_breakdown, op_summary, run_table, shard_table
from ..reductions.traces import traced_requests
from ..units import count
from ..verdict.attribution import Attribution
from . import plots
from .markup import figure_html, fmt, table_html
from .timeline_plot import bucket_text


def _package_version() -> str:
    try:
        return version("loadgen-analysis")
    except PackageNotFoundError:
        return "unknown"


def _host(host: object) -> str:
    if not isinstance(host, dict):
        return "—"
    parts = [str(host[k]) for k in ("hostname", "cpus") if k in host]
    return ", ".join(parts) + (" cpus" if "cpus" in host else "") if parts else "—"


def _shards_text(run: Run) -> str:
    text = f"{len(run.shards)} of {run.shard_count}"
    if run.missing_shards:
        text += " (missing " + ", ".join(f"{i}/{run.shard_count}" for i in run.missing_shards) + ")"
    return text


def _runs_html(runs: list[Run]) -> str:
    walls = run_table(runs)["wall_s"].tolist()
    sharded = any(r.shards for r in runs)
    rows = []
    for r, wall_s in zip(runs, walls, strict=True):
        hosts = []
        for part in r.parts:
            host = _host(part.meta.get("host") or {})
            if host not in hosts:
                hosts.append(host)
        row = {
            "run": r.label,
            "model": r.model or "—",
            "workers": r.connections,
            "target": r.config.get("url", "—"),
            "started": r.meta.get("created_at", "—"),
            "ended": r.meta.get("exit_reason", "— (no run.json)"),
            "rows": r.rows,
            "segments": len(r.segments),
            "client host": "; ".join(hosts),
            "loadgen": r.meta.get("loadgen_version", r.parquet_meta.get("loadgen.version")),
            "wall s": wall_s,
        }
        if sharded:
            row["shards"] = _shards_text(r) if r.shards else "—"
        rows.append(row)
    return table_html(pd.DataFrame(rows))


def _incomplete_html(run: Run) -> str:
    return (
        f"<div class='verdict errors'><b>Incomplete sharded run</b>: "
        f"{html.escape(run.label)} has {html.escape(_shards_text(run))} shards. Totals, "
        "throughput and workers in this report cover only the shards present.</div>"
    )


_SHARD_COLUMNS = {
    "shard": "shard",
    "directory": "directory",
    "host": "client host",
    "workers": "workers",
    "requests": "requests",
    "share_pct": "share %",
    "first_request_ms": "first request (ms)",
    "anchor_offset_ms": "anchor offset (ms)",
    "start_offset_ms": "late after --start-at (ms)",
}


def _shards_html(runs: list[Run]) -> str:
    table = shard_table(runs)
    parts = []
    for run in runs:
        if not run.shards:
            continue
        rows = table[table["run"] == run.label]
        first = rows["first_request_skew_ms"].iloc[0]
        offset = rows["start_offset_skew_ms"].iloc[0]
        skew = f"first requests {fmt(float(first))} ms apart"
        if not math.isnan(offset):
            skew += f", starts after --start-at {fmt(float(offset))} ms apart"
        parts.append(
            f"<p><b>{html.escape(run.label)}</b>: {html.escape(_shards_text(run))} shards, "
            f"analysed as one run (times from the earliest shard's wall-clock anchor); start "
            f"skew: {html.escape(skew)}.</p>"
        )
        if run.missing_shards:
            parts.append(_incomplete_html(run))
        parts.append(table_html(rows, _SHARD_COLUMNS))
    return "".join(parts)


def _threshold_value(value: float | None, unit: str) -> str:
    if value is None:
        return "nothing measured"
    if unit == "ns":
        return f"{value / 1e6:.3f} ms"
    if unit == "fraction":
        return f"{value * 100:.2f} %"
    return f"{value:,.1f} /s"


def _thresholds_html(runs: list[Run]) -> str:
    """Each run's thresholds (run.json ``thresholds``): what was asked, what was observed."""
    rows = []
    for run in runs:
        for t in run.meta.get("thresholds") or []:
            verdict = "passed" if t["passed"] else "<b>CROSSED</b>"
            rows.append(
                f"<tr><td>{html.escape(run.label)}</td><td><code>{html.escape(t['threshold'])}"
                f"</code></td><td>{html.escape(t['op'] or 'whole run')}</td>"
                f"<td>{_threshold_value(t['observed'], t['unit'])}</td>"
                f"<td>{_threshold_value(t['limit'], t['unit'])}</td><td>{verdict}</td></tr>"
            )
    head = (
        "<tr><th>run</th><th>threshold</th><th>op</th><th>observed</th><th>limit</th>"
        "<th>verdict</th></tr>"
    )
    crossed = sum(not t["passed"] for run in runs for t in run.meta.get("thresholds") or [])
    note = (
        f"<p><b>{count(crossed, 'threshold')} crossed</b>: the run exited with code 99.</p>"
        if crossed
        else "<p>Every threshold passed.</p>"
    )
    return note + f"<table>{head}{''.join(rows)}</table>"


def _checks_html(runs: list[Run]) -> list[str]:
    """The Checks section: failed rows per check (and the checks that never failed), and the
    requests skipped because a value they use was not extracted; nothing without checks."""
    failures = check_failures(runs)
    skipped = skipped_requests(runs)
    if failures.empty and skipped.empty:
        return []
    failed = int(failures["failed"].sum())
    note = (
        f"<p><b>{count(failed, 'response')} failed a check</b> "
        "(error class <code>check</code>).</p>"
        if failed
        else "<p>Every check passed.</p>"
        if checks_evaluated(runs)
        else "<p>Checks not evaluated: no response had an expected status, so no check ran.</p>"
    )
    parts = ["<h3>Checks</h3>", note]
    if not failures.empty:
        columns = {
            "run": "run",
            "op": "op",
            "check": "check",
            "failed": "failed",
            "share": "share of op",
        }
        parts.append(table_html(failures.fillna({"op": "(any)"}), columns))
    if not skipped.empty:
        parts += [
            "<p>Requests not sent because a value they use was not extracted:</p>",
            table_html(skipped, {"run": "run", "op": "op", "skipped": "skipped"}),
        ]
    return parts


def attribution_html(result: Attribution) -> str:
    said = (
        f"<b>Verdict: {html.escape(result.line)}</b><br>why: {html.escape(result.headline)}"
        if result.line
        else f"<b>Verdict: {html.escape(result.verdict)}</b> ({html.escape(result.confidence)} "
        f"evidence) — {html.escape(result.headline)}"
    )
    parts = [
        f'<div class="verdict {html.escape(result.verdict)}">{said}</div>',
        "<table><thead><tr><th>check</th><th>status</th><th>evidence</th></tr></thead><tbody>",
    ]
    for f in result.findings:
        css = "status-" + f.status.split()[0]
        parts.append(
            f"<tr><td>{html.escape(f.check)}</td><td class='{css}'>{html.escape(f.status)}</td>"
            f"<td style='text-align:left'>{html.escape(f.summary)}</td></tr>"
        )
    parts.append("</tbody></table>")
    if result.caveats:
        parts.append(
            "<ul class='note'>"
            + "".join(f"<li>{html.escape(c)}</li>" for c in result.caveats)
            + "</ul>"
        )
    return "".join(parts)


_SUMMARY_COLUMNS = {
    "run": "run",
    "op": "op",
    "requests": "requests",
    "failed": "failed",
    "throughput_rps": "req/s",
    "mean_ms": "mean ms",
    "min_ms": "min ms",
    "p50_ms": "p50 ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "p999_ms": "p99.9 ms",
    "max_ms": "max ms",
}


def header_section(runs: list[Run], title: str) -> list[str]:
    """The title, when and from what the report was made, and a warning per incomplete run."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='meta'>Generated {now} by loadgen-analysis {html.escape(_package_version())} "
        f"from {count(len(runs), 'run')}, {sum(r.rows for r in runs):,} recorded requests.</p>",
        *[_incomplete_html(r) for r in runs if r.missing_shards],
    ]


def runs_section(runs: list[Run]) -> list[str]:
    """The runs, and their shards and thresholds when they have some."""
    parts = ["<h2>Runs</h2>", _runs_html(runs)]
    if any(r.shards for r in runs):
        parts += ["<h2>Shards</h2>", _shards_html(runs)]
    if any(r.meta.get("thresholds") for r in runs):
        parts += ["<h2>Thresholds</h2>", _thresholds_html(runs)]
    return parts


_ERROR_COLUMNS = {
    "run": "run",
    "error": "error class",
    "count": "count",
    "share": "share",
    "first_s": "first (s)",
    "last_s": "last (s)",
    "peak_t_s": "peak second",
    "peak_count": "in peak second",
}


def summary_section(runs: list[Run]) -> list[str]:
    """The per-op summary, the failures (when some failed) and the checks (when there are)."""
    parts = ["<h2>Summary per op</h2>", table_html(op_summary(runs), _SUMMARY_COLUMNS)]
    parts += _warmup_html(runs)
    errors = error_breakdown(runs)
    if not errors.empty:
        parts += ["<h3>Failures</h3>", table_html(errors, _ERROR_COLUMNS)]
    return parts + _checks_html(runs)


def _warmup_html(runs: list[Run]) -> list[str]:
    """A line per run with a warm-up: how many of its rows this report leaves out."""
    lines = []
    for run in runs:
        left_out = sum(int((p.summary or {}).get("warmup_requests", 0)) for p in run.parts)
        if any("warmup_requests" in (p.summary or {}) for p in run.parts):
            lines.append(
                f"<p>{html.escape(run.label)}: {left_out} warm-up requests (phase "
                f"<code>{html.escape(WARMUP_PHASE)}</code>) are recorded and left out of this "
                "report.</p>"
            )
    return lines


_TRACE_COLUMNS = {
    "run": "run",
    "kind": "which",
    "trace_id": "trace id",
    "latency_ms": "latency (ms)",
    "status": "status",
    "error": "error",
    "op": "op",
    "start_s": "at (s)",
}


def traces_section(runs: list[Run]) -> list[str]:
    """With ``--trace``: the slowest requests and the failures by trace id; nothing without."""
    table = traced_requests(runs)
    if table.empty:
        return []
    note = (
        "<p class='note'>Each request carried a W3C <code>traceparent</code>; open these ids "
        "in the server's tracing backend (Jaeger, Tempo, any OpenTelemetry one) to see where "
        "the server spent the time.</p>"
    )
    return ["<h3>Traces</h3>", note, table_html(table, _TRACE_COLUMNS)]


_OPEN_COLUMNS = {
    "run": "run",
    "offered_rps": "offered (scheduled/s)",
    "achieved_rps": "achieved (sent/s)",
    "ok_rps": "ok/s",
    "scheduled": "scheduled",
    "sent": "sent",
    "dropped": "dropped",
    "dropped_share": "dropped share",
    "late": "late",
    "late_share": "late share",
    "lag_p50_ms": "send lag p50 (ms)",
    "lag_p99_ms": "send lag p99 (ms)",
    "lag_max_ms": "send lag max (ms)",
}


def open_model_section(runs: list[Run]) -> list[str]:
    """For open-model runs: the schedule offered against what was achieved, the sends dropped
    at --max-in-flight and late beyond --max-lateness, and the send lag; nothing otherwise."""
    table = open_model_table(runs)
    if table.empty:
        return []
    note = (
        "<p class='note'>Each send was scheduled at its intended time whatever the responses "
        "did; latency counts from that time. <em>Dropped</em>: not sent, the client was at "
        "--max-in-flight. <em>Late</em>: sent more than --max-lateness after its intended "
        "time. <em>Send lag</em>: actual send − intended time. Drops, late sends or a lag of "
        "milliseconds mean the client did not keep the schedule: then the latencies describe "
        "the client as much as the server.</p>"
    )
    return ["<h2>Open model: the schedule</h2>", note, table_html(table, _OPEN_COLUMNS)]


def distribution_section(runs: list[Run], bucket_s: float = 1.0) -> list[str]:
    """Throughput and latency over time (with the server's CPU and saturation when it was
    scraped), the percentile spectrum and latency components."""
    server = (
        " Under them, the target's CPU and the service's saturation gauges as scraped with "
        "--server-metrics (when the target shares the client's host, its CPU includes the "
        "client's)."
        if any(run.server_metrics_files for run in runs)
        else ""
    )
    return [
        "<h2>Over time</h2>",
        figure_html(
            plots.plot_timeline(runs, bucket_s=bucket_s),
            f"Throughput (ok and failed) and p50/p99 latency per {bucket_text(bucket_s)} "
            f"bucket; phases shaded.{server}",
        ),
        "<h2>Latency distribution</h2>",
        figure_html(
            plots.plot_percentile_spectrum(runs, by_op=True),
            "Latency percentile spectrum; exact percentiles from every recorded request.",
        ),
        figure_html(
            plots.plot_latency_components(runs),
            "Mean latency split into connect, send → first byte (server time and round trip) "
            "and transfer of the body.",
        ),
    ]
