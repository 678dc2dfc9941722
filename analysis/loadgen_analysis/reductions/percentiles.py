"""Latency percentiles of the reductions: which ones each table shows, and computing them
exactly (:mod:`.quantiles`) — inside :func:`~.cache.reuse_reductions` with
``all_percentiles``, every percentile a report shows in one pass (:func:`latency_cube`).

Percentiles use the same rank as HDR histograms (the ⌈q·n⌉-th smallest value), exactly, over
the rows with a response (``status > 0``). Also the percentile spectrum table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import duckdb
import numpy as np
import pandas as pd

from ..io.engine import REPORTED_LATENCY
from ..io.load import RunsArg, as_runs
from ..io.run import Run
from .cache import (
    cached_connection,
    cached_rollup,
    every_percentile_at_once,
    reused,
    runs_key,
    store,
    timed,
)
from .quantiles import exact_quantile_sets, exact_quantiles
from .rollup import count_sql

#: A percentile q of n latencies is shown only while n·(1−q) ≥ this many: at least 10 values
#: at or beyond it, so p99.999 needs a million responses (issue 30: a 352-request run showed
#: 99.999 %, which is its maximum).
MIN_TAIL_SAMPLES = 10

#: The latency of the rows with a response, as every table reports it (from the intended send
#: time for the open model: :data:`~loadgen_analysis.io.engine.REPORTED_LATENCY`).
_ANSWERED = f"{REPORTED_LATENCY} AS latency_ns FROM records WHERE status > 0"

#: Percentiles of the per-op summary, as (column suffix, quantile).
SUMMARY_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p999", 0.999),
)


#: Percentiles drawn on a spectrum plot.
SPECTRUM_PERCENTILES: tuple[float, ...] = (
    0.0,
    0.25,
    0.5,
    0.75,
    0.9,
    0.95,
    0.99,
    0.995,
    0.999,
    0.9995,
    0.9999,
    0.99999,
)


def with_latency_quantiles(
    con: duckdb.DuckDBPyConnection, runs: list[Run], frame: pd.DataFrame, keys: Sequence[str]
) -> pd.DataFrame:
    """``frame`` (one row per group of ``keys``) with p50_ms … p999_ms of the latency of the
    group's rows with a response (NaN for a group without one), exact, in bounded memory."""
    cube = latency_cube(runs, 1.0) if keys == ["run_index"] else None
    if cube is not None:
        quantiles = pick(cube["run"], [q for _, q in SUMMARY_PERCENTILES])
    else:
        relation = f"(SELECT {', '.join(keys)}, {_ANSWERED})"
        quantiles = exact_quantiles(
            con, relation, keys, "latency_ns", [q for _, q in SUMMARY_PERCENTILES]
        )
    frame = frame.merge(quantiles, on=list(keys), how="left")
    for i, (name, _) in enumerate(SUMMARY_PERCENTILES):
        frame[f"{name}_ms"] = [
            v[i] / 1e6 if isinstance(v, list | np.ndarray) else math.nan for v in frame["q"]
        ]
    return frame.drop(columns=["q"])


#: Latency percentiles computed per run and op whenever some are: the summary's and the
#: spectrum's, so a report's summary table and spectrum share one computation.
OP_PERCENTILES: tuple[float, ...] = tuple(
    sorted({q for _, q in SUMMARY_PERCENTILES} | set(SPECTRUM_PERCENTILES))
)


@reused
def op_latency_quantiles(runs: RunsArg, by_op: bool) -> pd.DataFrame:
    """Per run_index and op (``all`` when not ``by_op``): list ``q`` of the exact latencies
    at :data:`OP_PERCENTILES` of the rows with a response."""
    runs = as_runs(runs)
    cube = latency_cube(runs, 1.0)
    if cube is not None:
        return cube["op"] if by_op else cube["run"].assign(op="all")
    con = cached_connection(runs)
    op_expr = "op" if by_op else "'all'"
    relation = f"(SELECT run_index, {op_expr} AS op, {_ANSWERED})"
    return exact_quantiles(con, relation, ["run_index", "op"], "latency_ns", OP_PERCENTILES)


def pick(frame: pd.DataFrame, percentiles: Sequence[float]) -> pd.DataFrame:
    """``frame`` of :func:`op_latency_quantiles` with ``q`` cut to ``percentiles``."""
    at = [OP_PERCENTILES.index(p) for p in percentiles]
    frame = frame.copy()
    frame["q"] = [[v[i] for i in at] for v in frame["q"]]
    return frame


#: Latency percentiles of a timeline bucket.
TIMELINE_PERCENTILES = (0.5, 0.99)


def latency_cube(runs: list[Run], bucket_s: float) -> dict[str, pd.DataFrame] | None:
    """Inside :func:`reuse_reductions` (``all_percentiles``): every latency percentile a report
    shows — per run and per run and op (:data:`OP_PERCENTILES`), per run, phase and time
    bucket and per run and time bucket (p50, p99) — from one :func:`exact_quantile_sets`: two
    passes over the rows instead of two per table. Frames ``run``, ``op``, ``phase_bucket``,
    ``bucket`` as :func:`exact_quantiles` returns them; None outside (each reduction computes
    its own)."""
    reused = store()
    if reused is None or not every_percentile_at_once():
        return None
    key = ("latency_cube", runs_key(runs), bucket_s)
    if key not in reused:
        bucket_ns = int(bucket_s * 1e9)
        relation = (
            f"(SELECT run_index, op, phase, (start_ns + latency_ns) // {bucket_ns} AS bucket, "
            f"{_ANSWERED})"
        )
        sets = [
            (["run_index"], OP_PERCENTILES),
            (["run_index", "op"], OP_PERCENTILES),
            (["run_index", "phase", "bucket"], TIMELINE_PERCENTILES),
            (["run_index", "bucket"], TIMELINE_PERCENTILES),
        ]
        fine = ["run_index", "op", "phase", "bucket"]
        frames = timed(
            exact_quantile_sets, cached_connection(runs), relation, fine, "latency_ns", sets
        )
        reused[key] = dict(zip(("run", "op", "phase_bucket", "bucket"), frames, strict=True))
    return reused[key]


@reused
def percentile_spectrum(
    runs: RunsArg, percentiles: Sequence[float] = SPECTRUM_PERCENTILES, by_op: bool = True
) -> pd.DataFrame:
    """Latency at many percentiles, exactly, for a spectrum plot.

    Long frame with columns run, op (``all`` when ``by_op`` is false), percentile (0–1),
    latency_ms, responses (n) and supported (n·(1−q) ≥ :data:`MIN_TAIL_SAMPLES`; plots draw
    only those). Covers rows with a response.
    """
    runs = as_runs(runs)
    if not percentiles:
        raise ValueError("percentiles must not be empty")
    for p in percentiles:
        if not 0.0 <= p < 1.0:
            raise ValueError(f"percentile {p} outside [0, 1)")
    if set(percentiles) <= set(OP_PERCENTILES):
        frame = pick(op_latency_quantiles(runs, by_op), percentiles)
    else:
        con = cached_connection(runs)
        op_expr = "op" if by_op else "'all'"
        relation = f"(SELECT run_index, {op_expr} AS op, {_ANSWERED})"
        frame = exact_quantiles(con, relation, ["run_index", "op"], "latency_ns", percentiles)
    frame = frame.sort_values(["run_index", "op"])
    responses = _responses(runs, by_op)
    rows = []
    for record in frame.itertuples(index=False):
        n = responses.get((int(record.run_index), record.op), 0)
        for p, value in zip(percentiles, record.q, strict=True):
            label = runs[int(record.run_index)].label
            rows.append((label, record.op, float(p), value / 1e6, n, supported(p, n)))
    columns = ["run", "op", "percentile", "latency_ms", "responses", "supported"]
    return pd.DataFrame(rows, columns=columns)


def supported(q: float, responses: int) -> bool:
    """Whether ``responses`` latencies support percentile ``q``: n·(1−q) ≥ MIN_TAIL_SAMPLES
    (the minimum, q = 0, always)."""
    return q == 0.0 or responses * (1.0 - q) >= MIN_TAIL_SAMPLES - 1e-9


def _responses(runs: list[Run], by_op: bool) -> dict[tuple[int, str], int]:
    """Responses per (run index, op) from the rollup the report builds anyway."""
    con, table = cached_rollup(runs)
    op_expr = "op" if by_op else "'all'"
    counts = con.execute(
        f"SELECT run_index, {op_expr} AS op, {count_sql('responded')} FROM {table} GROUP BY ALL"
    ).fetchall()
    return {(int(run_index), op): int(n) for run_index, op, n in counts}
