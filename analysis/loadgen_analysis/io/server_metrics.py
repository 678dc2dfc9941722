"""The server's own metrics (``server-metrics.parquet``, written with ``loadgen run
--server-metrics URL``) as tidy frames: one row per sample, on the run's time base.

Responsible for reading each directory's file (checked against the contract's
``server_metrics`` entry) and putting a sharded run's samples on its earliest shard's anchor,
as the rest of the analysis does with the request rows. Not responsible for judging them:
what a CPU counter or a saturation gauge says about the run is the verdict's.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from ..errors import RunLoadError
from . import contract
from .load import as_runs
from .parquet import footer, read_frame
from .run import Run

#: The frame :func:`server_metrics` returns.
SAMPLE_COLUMNS = ("time_s", "source", "metric", "labels", "value")
#: The frame :func:`scrape_failures` returns.
FAILURE_COLUMNS = ("time_s", "source", "error", "scrape_s")


def _one_run(run: Run | str | Path) -> Run:
    runs = as_runs(run)
    if len(runs) != 1:
        raise RunLoadError(f"expected one run, got {len(runs)}; pass one run directory")
    return runs[0]


def _read(run: Run) -> pd.DataFrame:
    """Every row of every directory's file, ``t_ns`` rebased on the run's anchor."""
    frames = []
    for part in run.parts:
        path = part.path / "server-metrics.parquet"
        if not path.is_file():
            continue
        try:
            problems = contract.column_problems("server_metrics", footer(path).columns)
        except duckdb.Error as exc:
            raise RunLoadError(f"{path}: not a readable Parquet file ({exc})") from exc
        if problems:
            raise RunLoadError(f"{path}: not a server-metrics file loadgen wrote: {problems[0]}")
        frame = read_frame(path)
        if run.shards and part.anchor_unix_ns is not None and run.anchor_unix_ns is not None:
            frame["t_ns"] += part.anchor_unix_ns - run.anchor_unix_ns
        if run.shards and part.shard:
            frame["shard"] = part.shard[0]
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*contract.column_names("server_metrics"), "shard"])
    return pd.concat(frames, ignore_index=True).sort_values("t_ns", kind="stable")


def server_metrics(run: Run | str | Path, metric: str | None = None) -> pd.DataFrame:
    """The samples the server's endpoints returned during the run: ``time_s`` (when the
    scrape started, seconds from the run's start), ``source`` (the URL), ``metric``,
    ``labels`` (``name="value"`` pairs sorted by name, comma-joined; ``""`` without labels)
    and ``value`` — plus ``shard`` for a sharded run (each shard scrapes on its own).
    ``metric`` keeps only that metric. Empty when the run scraped nothing."""
    frame = _read(_one_run(run))
    frame = frame[frame["error"].isna()]
    if metric is not None:
        frame = frame[frame["metric"] == metric]
    frame = frame.assign(time_s=frame["t_ns"] / 1e9)
    extra = ["shard"] if "shard" in frame and frame["shard"].notna().any() else []
    return frame[[*SAMPLE_COLUMNS, *extra]].reset_index(drop=True)


def scrape_failures(run: Run | str | Path) -> pd.DataFrame:
    """The scrapes that returned no samples: ``time_s``, ``source``, ``error`` (``timeout``,
    ``connect: …``, ``status N``, ``parse: …``) and ``scrape_s`` (how long it tried)."""
    frame = _read(_one_run(run))
    frame = frame[frame["error"].notna()]
    frame = frame.assign(time_s=frame["t_ns"] / 1e9, scrape_s=frame["scrape_ns"] / 1e9)
    return frame[list(FAILURE_COLUMNS)].reset_index(drop=True)
