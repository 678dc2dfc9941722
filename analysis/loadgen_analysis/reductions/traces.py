"""The requests to open in a tracing backend: with ``loadgen run --trace`` every row keeps the
W3C trace id its ``traceparent`` header carried (``trace_id``), and this module picks, per
run, the slowest requests and the failures with their ids — what ``explain`` and ``report``
list, so a user pastes an id into Jaeger, Tempo or any OpenTelemetry backend.

Responsible for the selection only (DuckDB top-N per run, streaming: no sort of all rows);
nothing here is judged.
"""

from __future__ import annotations

import pandas as pd

from ..io.engine import REPORTED_LATENCY, connect
from ..io.load import RunsArg, as_runs

#: The frame :func:`traced_requests` returns.
COLUMNS = ("run", "kind", "op", "start_s", "latency_ms", "status", "error", "trace_id")

#: How many of each kind per run, unless asked otherwise.
DEFAULT_COUNT = 5


def traced_requests(runs: RunsArg, count: int = DEFAULT_COUNT) -> pd.DataFrame:
    """Per run with trace ids: its ``count`` slowest requests (``kind`` ``slowest``, by the
    reported latency) and its first ``count`` failures (``kind`` ``failed``), each with
    ``op``, ``start_s`` (from the run's start), ``latency_ms``, ``status``, ``error`` and
    ``trace_id``. Empty when no run was recorded with ``--trace``."""
    runs = as_runs(runs)
    con = connect(runs)
    names = {row[0] for row in con.execute("DESCRIBE records").fetchall()}
    if "trace_id" not in names:
        return pd.DataFrame(columns=list(COLUMNS))
    select = (
        f"SELECT run, op_name AS op, start_ns / 1e9 AS start_s, {REPORTED_LATENCY} / 1e6 "
        "AS latency_ms, status, error_class AS error, trace_id FROM records "
        "WHERE trace_id IS NOT NULL AND run_index = ?"
    )
    frames = []
    for index in range(len(runs)):
        for kind, where, order in (
            ("slowest", "", f"{REPORTED_LATENCY} DESC"),
            ("failed", " AND error_class IS NOT NULL", "start_ns"),
        ):
            query = f"{select}{where} ORDER BY {order} LIMIT {int(count)}"
            frame = con.execute(query, [index]).df()
            frames.append(frame.assign(kind=kind))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def traces_text(table: pd.DataFrame) -> str:
    """The table as the lines ``explain`` prints under the verdict; ``""`` when empty."""
    if table.empty:
        return ""
    lines = ["Traces (--trace): the slowest requests and the failures, to open by trace id"]
    for row in table.itertuples(index=False):
        error = f" {row.error}" if isinstance(row.error, str) else ""
        lines.append(
            f"  {row.kind:<7} {row.trace_id}  {row.latency_ms:9.2f} ms  status {row.status}"
            f"{error}  {row.op} at {row.start_s:.3f} s"
            + (f"  ({row.run})" if table["run"].nunique() > 1 else "")
        )
    return "\n".join(lines)
