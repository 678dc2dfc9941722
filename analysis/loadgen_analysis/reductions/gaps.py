"""Gaps between a worker's consecutive requests, in one streaming pass over the segments
instead of a sort of every row.

The gap of a request is its worker's next request's start minus this request's end (none for
a worker's last request). Ordering all rows by worker and start time (a SQL window) sorts the
whole run — at 100 million rows minutes of work and gigabytes spilled. It is not needed:
``loadgen`` writes each worker's requests in the order it sent them (a worker hands its batches
to the segment writer in order, and segments are numbered), so reading a run's segments in
order and remembering each worker's previous request gives every gap exactly. The pass checks
that order as it goes (each worker's starts strictly increasing); a run whose files are not in
that order (not written by ``loadgen``, or shards that reuse worker ids) raises
:class:`OutOfOrderError`, and the caller falls back to the window.

:func:`scan_gaps` returns the sums a gap table needs, per run and worker, and leaves every gap
in temporary Parquet files (group and gap per request, written by DuckDB a batch at a time)
that :func:`register_gap_values` hands to DuckDB for exact percentiles; memory holds one batch
and per-worker counters. Not responsible for the tables built from them (see
:mod:`.gap_tables`).
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from ..io.engine import engine_settings, literal_path
from ..io.parquet import sql_string
from ..io.run import Run

#: Rows read per batch.
BATCH_ROWS = 1 << 20

#: Counters kept per worker, in this order.
SUMS = ("requests", "latency_ns", "gaps", "gap_ns", "gap_latency_ns")


class OutOfOrderError(RuntimeError):
    """A worker's requests are not in start order in the run's files."""


@dataclass
class RunGaps:
    """One run's counters. ``sums[k][worker]``: requests, summed latency (ns), requests with a
    next one, summed gap (ns) and summed latency of those requests; ``gap_max_ns`` per worker
    (int64 min where none); per half of the run (split at ``mid_ns``) the gaps' count and sum."""

    sums: dict[str, np.ndarray] = field(default_factory=dict)
    gap_max_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    halves: list[list[int]] = field(default_factory=lambda: [[0, 0], [0, 0]])

    def add(self, workers: np.ndarray, latency: np.ndarray) -> None:
        """Count requests of ``workers`` (sorted or distinct) with their latencies."""
        ids, counts, at = self._groups(workers)
        self.sums["requests"][ids] += counts
        self.sums["latency_ns"][ids] += np.add.reduceat(latency, at)

    def add_gaps(
        self,
        workers: np.ndarray,
        start: np.ndarray,
        latency: np.ndarray,
        gap: np.ndarray,
        mid_ns: float,
    ) -> None:
        """Count requests of ``workers`` (sorted or distinct) that have a next one, with their
        latencies and gaps; per half of the run (start before ``mid_ns`` or not) too."""
        ids, counts, at = self._groups(workers)
        latency_sums = np.add.reduceat(latency, at)
        self.sums["requests"][ids] += counts
        self.sums["latency_ns"][ids] += latency_sums
        self.sums["gaps"][ids] += counts
        self.sums["gap_ns"][ids] += np.add.reduceat(gap, at)
        self.sums["gap_latency_ns"][ids] += latency_sums
        self.gap_max_ns[ids] = np.maximum(self.gap_max_ns[ids], np.maximum.reduceat(gap, at))
        early = start < mid_ns
        early_count, early_sum = int(early.sum()), int(gap[early].sum())
        self.halves[0][0] += early_count
        self.halves[0][1] += early_sum
        self.halves[1][0] += len(gap) - early_count
        self.halves[1][1] += int(gap.sum()) - early_sum

    def _groups(self, workers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct ids of ``workers`` (sorted or distinct), how many rows each has, and
        where each one's rows start — exact int64 sums per worker by ``reduceat``, which is
        much faster than ``np.add.at``."""
        self.grow(int(workers.max()) + 1)
        at = np.flatnonzero(np.concatenate(([True], workers[1:] != workers[:-1])))
        return workers[at], np.diff(np.append(at, len(workers))), at

    def grow(self, workers: int) -> None:
        have = len(self.gap_max_ns)
        if workers <= have:
            return
        pad = workers - have
        for key in SUMS:
            self.sums[key] = np.concatenate(
                [self.sums.get(key, np.zeros(0, np.int64)), np.zeros(pad, np.int64)]
            )
        low = np.full(pad, np.iinfo(np.int64).min, np.int64)
        self.gap_max_ns = np.concatenate([self.gap_max_ns, low])


@dataclass
class GapScan:
    """What :func:`scan_gaps` found: per run its counters, and the file of (group, gap) rows
    (group = run_index·2³² + worker)."""

    runs: list[RunGaps]
    #: The folder of Parquet files holding them.
    values: Path
    #: The temporary folder, when this scan created it (removed again if left empty).
    created: Path | None = None

    def close(self) -> None:
        shutil.rmtree(self.values, ignore_errors=True)
        if self.created is not None:
            with contextlib.suppress(OSError):
                self.created.rmdir()


def _ordered_columns(part: Run, offset_ns: int) -> Iterator[tuple[np.ndarray, ...]]:
    """(worker, start_ns, latency_ns) of one directory's rows in file order, start rebased.
    DuckDB reads the files; keeping insertion order keeps file order."""
    # Its own small engine: a streaming scan needs little memory, and the analysis's own
    # connection keeps its whole limit.
    settings = engine_settings() | {"preserve_insertion_order": "true", "memory_limit": "64MB"}
    con = duckdb.connect(":memory:", config=settings)
    # DuckDB hands rows over in whole vectors (2,048 rows): at least one a batch.
    vectors = max(1, BATCH_ROWS // duckdb.__standard_vector_size__)
    for segment in part.segments:
        con.execute(
            "SELECT worker, start_ns, latency_ns FROM read_parquet(?)", [literal_path(segment)]
        )
        while len(batch := con.fetch_df_chunk(vectors)):
            worker = batch["worker"].to_numpy().astype(np.int64)
            start = batch["start_ns"].to_numpy().astype(np.int64, copy=False)
            latency = batch["latency_ns"].to_numpy().astype(np.int64, copy=False)
            yield worker, start + offset_ns if offset_ns else start, latency
    con.close()


def _requests(run: Run) -> Iterator[tuple[np.ndarray, ...]]:
    """Every request of ``run`` as (worker, start_ns, latency_ns, gap_ns) chunks; in each chunk
    the workers are sorted or distinct; gap_ns is None for the workers' last requests."""
    pending_start = np.zeros(0, np.int64)
    pending_latency = np.zeros(0, np.int64)
    pending = np.zeros(0, bool)
    for part in run.parts:
        offset = 0
        if run.shards and part.anchor_unix_ns is not None and run.anchor_unix_ns is not None:
            offset = part.anchor_unix_ns - run.anchor_unix_ns
        for worker, start, latency in _ordered_columns(part, offset):
            if len(worker) == 0:
                continue
            top = int(worker.max()) + 1
            if top > len(pending):
                pad = top - len(pending)
                pending_start = np.concatenate([pending_start, np.zeros(pad, np.int64)])
                pending_latency = np.concatenate([pending_latency, np.zeros(pad, np.int64)])
                pending = np.concatenate([pending, np.zeros(pad, bool)])
            # Radix sort (stable) when the ids fit 16 bits: keeps each worker's file order.
            keys = worker.astype(np.uint16) if top <= 1 << 16 else worker
            order = np.argsort(keys, kind="stable")
            w, s, lat = worker[order], start[order], latency[order]
            same = w[1:] == w[:-1]
            if np.any(s[1:][same] <= s[:-1][same]):
                raise OutOfOrderError("a worker's starts do not increase in file order")
            last = np.append(~same, True)
            gap = np.append(s[1:] - (s[:-1] + lat[:-1]), 0)
            inner = ~last
            yield w[inner], s[inner], lat[inner], gap[inner]
            # A worker's request held over from an earlier batch gets its gap now.
            first = np.insert(~same, 0, True)
            fw, fs = w[first], s[first]
            held = pending[fw]
            hw, hs = fw[held], pending_start[fw[held]]
            if np.any(fs[held] <= hs):
                raise OutOfOrderError("a worker's starts do not increase across segments")
            hl = pending_latency[hw]
            yield hw, hs, hl, fs[held] - (hs + hl)
            lw = w[last]
            pending_start[lw], pending_latency[lw], pending[lw] = s[last], lat[last], True
    # Each worker's last request has no next one.
    lw = np.flatnonzero(pending)
    yield lw, pending_start[lw], pending_latency[lw], None


def scan_gaps(runs: Sequence[Run], mids_ns: Sequence[float]) -> GapScan:
    """One pass over ``runs`` (see the module doc). ``mids_ns[i]``: where run i's first half
    ends (a request is in the first half when its start is before it)."""
    folder = Path(engine_settings()["temp_directory"])
    created = None if folder.exists() else folder
    folder.mkdir(parents=True, exist_ok=True)
    values = folder / f"gaps-{uuid.uuid4().hex}"
    out: list[RunGaps] = []
    try:
        with _GapFiles(values) as sink:
            for index, run in enumerate(runs):
                acc = RunGaps()
                for w, s, lat, gap in _requests(run):
                    if len(w) == 0:
                        continue
                    if gap is None:
                        acc.add(w, lat)
                        continue
                    acc.add_gaps(w, s, lat, gap, mids_ns[index])
                    sink.add((index << 32) + w, gap)
                out.append(acc)
    except BaseException:
        GapScan(out, values, created).close()
        raise
    return GapScan(out, values, created)


class _GapFiles:
    """(g, gap_ns) rows written to Parquet files in ``folder`` by DuckDB, about
    :data:`BATCH_ROWS` a file (at least one file, so the folder always reads as a table)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.folder, self.files, self.rows = folder, 0, 0
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.con = duckdb.connect(":memory:", config={"memory_limit": "64MB"})

    def __enter__(self) -> _GapFiles:
        return self

    def add(self, group: np.ndarray, gap_ns: np.ndarray) -> None:
        self.pending.append((group.astype(np.int64), gap_ns.astype(np.int64)))
        self.rows += len(group)
        if self.rows >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.pending and self.files:
            return
        chunk = pd.DataFrame(
            {
                "g": np.concatenate([g for g, _ in self.pending] or [np.zeros(0, np.int64)]),
                "gap_ns": np.concatenate([v for _, v in self.pending] or [np.zeros(0, np.int64)]),
            }
        )
        target = sql_string(str(self.folder / f"part-{self.files:06d}.parquet"))
        self.con.register("chunk", chunk)
        self.con.execute(f"COPY chunk TO {target} (FORMAT parquet, COMPRESSION uncompressed)")
        self.con.unregister("chunk")
        self.files, self.rows, self.pending = self.files + 1, 0, []

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is None:
                self._flush()
        finally:
            self.con.close()


def register_gap_values(con: duckdb.DuckDBPyConnection, scan: GapScan, name: str) -> None:
    """(Re)define ``name`` on ``con`` as the scan's (g, gap_ns) rows, read from its files."""
    files = sql_string(literal_path(scan.values) + "/*.parquet")
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT g, gap_ns FROM read_parquet({files})"
    )
