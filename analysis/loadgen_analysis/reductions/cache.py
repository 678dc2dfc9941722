"""Reading the rows once per command: the cache the reductions share.

Inside :func:`reuse_reductions` a reduction asked for twice on the same runs with the same
arguments answers from a store, and the reductions share one DuckDB connection and one rollup
(:mod:`.rollup`) per set of runs; outside it every call reads the rows. With
``LOADGEN_ANALYSIS_PROFILE=1`` each reduction's wall time goes to stderr. Responsible for
when rows are read, not for what is computed from them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import duckdb
import pandas as pd

from ..io.engine import connect
from ..io.load import RunsArg, as_runs
from ..io.run import Run
from .rollup import build_rollup

_Reduction = TypeVar("_Reduction", bound=Callable[..., pd.DataFrame])


_Result = TypeVar("_Result")


#: Frames computed inside :func:`reuse_reductions`, by (function, runs, arguments); None
#: outside one.
_REUSED: dict[tuple[Any, ...], Any] | None = None


#: Inside :func:`reuse_reductions` with ``all_percentiles``: compute every latency percentile
#: a report shows in one go (see :func:`latency_cube`).
_ALL_PERCENTILES = False


@contextlib.contextmanager
def reuse_reductions(all_percentiles: bool = False) -> Iterator[None]:
    """Within this block, a reduction asked for twice on the same runs with the same arguments
    (a report asks for the run table, the errors and the latency components both for its
    verdict and for its tables) reads the rows once; each call still gets its own copy.
    Outside it every call reads the rows, so a notebook never sees a stale frame.

    ``all_percentiles``: the first latency percentile asked for computes all a report shows
    (per run, per op, per second) in the same two passes; worth it only when they will all be
    asked for."""
    global _REUSED, _ALL_PERCENTILES
    outer, outer_all = _REUSED, _ALL_PERCENTILES
    _REUSED = {} if outer is None else outer
    _ALL_PERCENTILES = all_percentiles or outer_all
    try:
        yield
    finally:
        _REUSED, _ALL_PERCENTILES = outer, outer_all


def store() -> dict[tuple[Any, ...], Any] | None:
    """The frames kept by the enclosing :func:`reuse_reductions`, by key; None outside one."""
    return _REUSED


def every_percentile_at_once() -> bool:
    """Inside :func:`reuse_reductions` with ``all_percentiles``: the first latency percentile
    asked for computes all a report shows (see :func:`.percentiles.latency_cube`)."""
    return _REUSED is not None and _ALL_PERCENTILES


def runs_key(runs: Sequence[Run]) -> tuple[Any, ...]:
    return tuple((r.label, r.location, r.segments, r.rows) for r in runs)


def timed(function: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
    """``function(*args, **kwargs)``; with ``LOADGEN_ANALYSIS_PROFILE=1`` in the environment,
    its wall time goes to stderr (which reduction a slow command spends its time in)."""
    if os.environ.get("LOADGEN_ANALYSIS_PROFILE") != "1":
        return function(*args, **kwargs)
    started = time.perf_counter()
    try:
        return function(*args, **kwargs)
    finally:
        took = time.perf_counter() - started
        print(f"loadgen-analysis: {function.__name__} {took:.2f} s", file=sys.stderr)


def reused(function: _Reduction) -> _Reduction:
    """Make ``function(runs, *args, **kwargs)`` answer from :func:`reuse_reductions`'s store."""

    @functools.wraps(function)
    def wrapper(runs: RunsArg, *args: Any, **kwargs: Any) -> pd.DataFrame:
        if _REUSED is None:
            return timed(function, runs, *args, **kwargs)
        runs = as_runs(runs)
        key = (function.__name__, runs_key(runs), args, tuple(sorted(kwargs.items())))
        if key not in _REUSED:
            _REUSED[key] = timed(function, runs, *args, **kwargs)
        return _REUSED[key].copy()

    return wrapper  # type: ignore[return-value]


def cached_connection(runs: list[Run]) -> duckdb.DuckDBPyConnection:
    """:func:`~loadgen_analysis.io.engine.connect` on ``runs``; inside :func:`reuse_reductions` one
    per set of runs, so the rollups built on it serve every reduction."""
    if _REUSED is None:
        return connect(runs)
    key = ("_connection", runs_key(runs))
    if key not in _REUSED:
        _REUSED[key] = connect(runs)
    return _REUSED[key]


def cached_rollup(runs: list[Run], bucket_s: float = 1.0) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A connection and the name of its table holding the rollup of ``runs``' rows with time
    buckets of ``bucket_s`` (see :mod:`.rollup`; ``<name>_workers`` beside it):
    built once inside :func:`reuse_reductions`, else for each call."""
    con = cached_connection(runs)
    bucket_ns = int(bucket_s * 1e9)
    name = f"rollup_{bucket_ns}"
    key = rollup_key(runs, bucket_ns)
    if _REUSED is None or key not in _REUSED:
        timed(build_rollup, con, bucket_ns, name)
        if _REUSED is not None:
            _REUSED[key] = name
    return con, name


def rollup_key(runs: list[Run], bucket_ns: int) -> tuple[Any, ...]:
    return ("_rollup", runs_key(runs), bucket_ns)
