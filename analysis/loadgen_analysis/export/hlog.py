"""A run's latencies as an HdrHistogram interval log (``.hlog``): one interval per second of
the run and op, tagged with the op, and one untagged interval per second of every op's
latencies (what ``HistogramLogProcessor`` reads without ``-tag``), in the format
HdrHistogram's own tools read (``HistogramLogProcessor``, HdrHistogramVisualizer, the
``hdrhistogram`` Python package's ``HistogramLogReader``). The histograms are encoded by the
``hdrhistogram`` package.

The latency is the one every table reports (:data:`~loadgen_analysis.io.engine.REPORTED_LATENCY`:
from the intended send for the open model, else from the actual send), of the rows with a
response, each counted in the second it completed, as the analysis' timelines do. Values are
nanoseconds (HdrHistogram's usual unit; the interval's max column is in milliseconds, with
its fraction), 1 ns to one hour at 3 significant digits, as loadgen's own histograms. A tag is
the op with each space or comma made ``_`` (``GET /`` → ``GET_/``), since tags end at a comma.

Bounded memory: DuckDB counts the latencies per (second, op, histogram bucket) — the bucket's
lowest value, worked out in SQL exactly as HdrHistogram does — spilling to disk when it must;
the counts arrive in time order and one interval's histogram at a time is filled and written.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TextIO

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

from ..io.engine import REPORTED_LATENCY, connect
from ..io.run import Run

#: The exported histograms' range and precision: 1 ns to 1 h at 3 significant digits, the usual
#: HdrHistogram setting for latencies in nanoseconds (a longer latency is counted as 1 h).
LOWEST_NS, HIGHEST_NS, DIGITS = 1, 3_600_000_000_000, 3

#: ``log2`` of half the sub-buckets of a 3-digit histogram (2048 sub-buckets).
_HALF_MAGNITUDE = 10

_ROWS_PER_FETCH = 100_000

_COUNTS = f"""
WITH answered AS (
    SELECT op_name AS op, (start_ns + latency_ns) // 1000000000 AS second,
           least(greatest({REPORTED_LATENCY}, {LOWEST_NS}), {HIGHEST_NS}) AS v
    FROM records WHERE status > 0
), guessed AS (SELECT *, CAST(floor(log2(v)) AS INTEGER) AS m FROM answered),
top_bit AS (
    SELECT op, second, v, CASE WHEN (CAST(1 AS BIGINT) << m) > v THEN m - 1
        WHEN (CAST(1 AS BIGINT) << (m + 1)) <= v THEN m + 1 ELSE m END AS msb
    FROM guessed
)
SELECT second, op, (v >> greatest(0, msb - {_HALF_MAGNITUDE}))
       << greatest(0, msb - {_HALF_MAGNITUDE}) AS value, count(*) AS n
FROM top_bit GROUP BY ALL ORDER BY second, op, value
"""


def tag(op: str) -> str:
    """The op as an interval tag: spaces and commas made ``_``."""
    return re.sub(r"[\s,]", "_", op)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)


def write_hlog(run: Run, sink: TextIO) -> int:
    """Writes ``run``'s interval log; returns the number of intervals (untagged ones too)."""
    writer = HistogramLogWriter(sink)
    _header(run, writer)
    con = connect(run)
    try:
        result = con.execute(_COUNTS)
        intervals, current, histogram, every_op = 0, None, new_histogram(), new_histogram()
        while batch := result.fetchmany(_ROWS_PER_FETCH):
            for second, op, value, n in batch:
                if (second, op) != current:
                    intervals += _interval(sink, current, histogram)
                    if current is not None and current[0] != second:
                        intervals += _interval(sink, (current[0], None), every_op)
                        every_op = new_histogram()
                    current, histogram = (second, op), new_histogram()
                histogram.record_value(value, n)
                every_op.record_value(value, n)
        intervals += _interval(sink, current, histogram)
        if current is not None:
            intervals += _interval(sink, (current[0], None), every_op)
    finally:
        con.close()
    return intervals


def _interval(sink: TextIO, key: tuple[int, str | None] | None, histogram: HdrHistogram) -> int:
    """Writes one interval (none before the first): tagged with its op, or untagged — every
    op's latencies of that second, the form other tools write and read without ``-tag``.
    Returns how many it wrote. The line is written here, not by ``HistogramLogWriter``, whose
    max column floors to whole milliseconds (0.000 for every latency below 1 ms)."""
    if key is None:
        return 0
    second, op = key
    prefix = "" if op is None else f"Tag={tag(op)},"
    max_ms = histogram.get_max_value() / 1e6
    payload = histogram.encode().decode("ascii")
    sink.write(f"{prefix}{float(second):f},{1.0:f},{max_ms:f},{payload}\n")
    return 1


def _header(run: Run, writer: HistogramLogWriter) -> None:
    """Comments, the format version, the run's anchor as StartTime and BaseTime (interval
    times count from it), and the legend."""
    anchor_s = (run.anchor_unix_ns or 0) / 1e9
    writer.output_comment(
        f"loadgen run {run.label}: latency in ns per op (Tag), from the intended send time "
        "where a request has one (the open model), else from the actual send"
    )
    writer.output_log_format_version()
    started = datetime.fromtimestamp(anchor_s, UTC).isoformat()
    writer.output_comment(f"[StartTime: {anchor_s:f} (seconds since epoch), {started}]")
    writer.output_base_time(anchor_s * 1000.0)
    writer.output_legend()
