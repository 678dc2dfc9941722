"""``loadgen-analyze summary``'s table for people: per run and op the requests, failures, the
throughput and the latency percentiles, formatted (thousands separated, three significant
digits, units in the header), the run column only when there are several runs. Scripts take
``--json`` or ``--csv``, which hold every column of :func:`~..reductions.summary.op_summary`.
"""

from __future__ import annotations

import math

import pandas as pd

#: The columns people read, as op_summary names them → the header they read.
COLUMNS = {
    "run": "run",
    "op": "op",
    "requests": "requests",
    "failed": "failed",
    "error_rate": "errors",
    "throughput_rps": "req/s",
    "p50_ms": "p50 ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "p999_ms": "p99.9 ms",
    "max_ms": "max ms",
}


def _number(value: object) -> str:
    """``1.55``, ``13.8``, ``2,509``: two decimals under 10, one under 100, none above."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    number = float(value)  # type: ignore[arg-type]
    if abs(number) < 10:
        return f"{number:.2f}"
    if abs(number) < 100:
        return f"{number:.1f}"
    return f"{number:,.0f}"


def _percent(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{float(value) * 100:.2f} %"  # type: ignore[arg-type]


def summary_table(frame: pd.DataFrame) -> str:
    """The per-op table (module docs), one line a run's op: names left-aligned, numbers
    right-aligned under their header."""
    shown = frame[[c for c in COLUMNS if c in frame]].copy()
    if shown["run"].nunique() == 1:
        shown = shown.drop(columns="run")
    cells: dict[str, list[str]] = {}
    for column in shown.columns:
        if column == "error_rate":
            cells[column] = [_percent(v) for v in shown[column]]
        elif column in ("requests", "failed"):
            cells[column] = [f"{int(v):,}" for v in shown[column]]
        elif column in ("run", "op"):
            cells[column] = [str(v) for v in shown[column]]
        else:
            cells[column] = [_number(v) for v in shown[column]]
    widths = {c: max(len(COLUMNS[c]), *(len(v) for v in cells[c])) for c in cells}

    def line(values: dict[str, str]) -> str:
        return "  ".join(
            values[c].ljust(widths[c]) if c in ("run", "op") else values[c].rjust(widths[c])
            for c in cells
        ).rstrip()

    rows = [line({c: COLUMNS[c] for c in cells})]
    rows += [line({c: cells[c][i] for c in cells}) for i in range(len(shown))]
    return "\n".join(rows)


def grpc_failures_text(runs: list) -> str:
    """``loadgen-analyze summary``'s block of failed gRPC calls per run, by status number, name
    and the server's message as loadgen counted and named them (run.json
    ``summary.failed_grpc``: ``5 NOT_FOUND "no bob, ever"``), most frequent first; empty when
    no run has any."""
    lines = []
    for run in runs:
        failed = (run.meta.get("summary") or {}).get("failed_grpc") or {}
        for status, count in sorted(failed.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(
                f"{run.label}: {status} × {count:,}" if len(runs) > 1 else f"{status} × {count:,}"
            )
    return (
        "gRPC failures (status, name, the server's message)\n" + "\n".join(lines) if lines else ""
    )
