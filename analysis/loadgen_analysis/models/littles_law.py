"""Little's Law applied to closed-model load tests.

Responsible for: the calibration R(1) (latency of one worker alone), the prediction a course
report makes from it — X(N) = N / R(1), i.e. N workers each as fast as one alone — and the
table that sets observed X(N), mean latency R(N) and effective concurrency N_eff = X · R̄ against
it. N_eff well below the configured N means workers were not busy with requests (the client is
pacing the load); N_eff ≈ N with X below the prediction means requests waited somewhere past
the client.

A sweep here is a DataFrame with one row per run and at least the columns ``connections`` and
``throughput_rps`` (plus ``mean_latency_ms``, ``requests`` and ``wall_s`` when known), as
:func:`loadgen_analysis.reductions.summary.run_table` returns, or as a published table gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.run import Run
from ..reductions.summary import run_table

Basis = Literal["latency", "throughput"]
Rounding = Literal["none", "round", "floor"]


@dataclass(frozen=True)
class Calibration:
    """What one worker (or a few) achieved alone: the baseline of the prediction."""

    workers: int
    requests: int
    wall_s: float
    mean_latency_s: float | None = None
    source: str = ""

    @property
    def throughput_rps(self) -> float:
        """X(1): requests / wall time of the calibration run."""
        return self.requests / self.wall_s

    @property
    def r1_s(self) -> float:
        """R(1): the mean latency when known, else the time per request of one worker."""
        if self.mean_latency_s is not None:
            return self.mean_latency_s
        return self.wall_s * self.workers / self.requests

    def per_worker_rps(self, basis: Basis = "latency", rounding: Rounding = "none") -> float:
        """The rate one worker sustains alone: 1 / R(1) (``latency``) or X(1) / workers
        (``throughput``, which also counts the client's own time between requests).

        ``rounding`` reproduces reports that rounded it (``round``) or truncated it
        (``floor``) before multiplying by N.
        """
        if basis == "latency":
            rate = 1.0 / self.r1_s
        elif basis == "throughput":
            rate = self.throughput_rps / self.workers
        else:
            raise ValueError(f"basis must be 'latency' or 'throughput', not {basis!r}")
        if rounding == "round":
            return float(math.floor(rate + 0.5))
        if rounding == "floor":
            return float(math.floor(rate))
        if rounding != "none":
            raise ValueError(f"rounding must be 'none', 'round' or 'floor', not {rounding!r}")
        return rate

    @classmethod
    def from_run(cls, run: Run | str) -> Calibration:
        """Calibration from a recorded run (normally ``-c 1``)."""
        (run,) = as_runs(run)
        row = run_table(run).iloc[0]
        workers = int(row["connections"]) if pd.notna(row["connections"]) else 1
        return cls(
            workers=workers,
            requests=int(row["requests"]),
            wall_s=float(row["wall_s"]),
            mean_latency_s=float(row["mean_busy_ms"]) / 1e3,
            source=run.label,
        )


def predicted_throughput(
    calibration: Calibration | float,
    connections: Sequence[float] | np.ndarray,
    basis: Basis = "latency",
    rounding: Rounding = "none",
) -> np.ndarray:
    """Little's Law prediction X(N) = N / R(1) for each N (``calibration`` may be R(1) in s)."""
    if isinstance(calibration, Calibration):
        rate = calibration.per_worker_rps(basis, rounding)
    else:
        if calibration <= 0:
            raise ValueError(f"R(1) must be positive, not {calibration}")
        rate = 1.0 / float(calibration)
    return np.asarray(connections, dtype=float) * rate


def calibration_from_sweep(sweep: pd.DataFrame, source: str = "") -> Calibration:
    """The calibration a sweep carries: its one-worker row, else its smallest-N row."""
    if sweep.empty:
        raise ValueError("the sweep has no rows")
    row = sweep.sort_values("connections").iloc[0]
    mean_s: float | None = None
    for column in ("mean_busy_ms", "mean_latency_ms"):
        if column in row and pd.notna(row[column]):
            mean_s = float(row[column]) / 1e3
            break
    if "requests" in row and "wall_s" in row:
        requests, wall_s = int(row["requests"]), float(row["wall_s"])
    else:  # only a throughput is known: one second's worth
        requests, wall_s = round(float(row["throughput_rps"])), 1.0
    label = str(row["run"]) if "run" in row else source
    return Calibration(
        workers=int(row["connections"]),
        requests=requests,
        wall_s=wall_s,
        mean_latency_s=mean_s,
        source=label,
    )


def sweep_table(runs: RunsArg) -> pd.DataFrame:
    """The per-run table of a sweep (see :func:`loadgen_analysis.reductions.summary.run_table`),
    sorted by configured workers."""
    table = run_table(as_runs(runs))
    if table["connections"].isna().any():
        missing = ", ".join(table.loc[table["connections"].isna(), "run"])
        raise ValueError(f"runs without a configured worker count cannot form a sweep: {missing}")
    return table.sort_values(["connections", "run"], kind="stable").reset_index(drop=True)


def littles_law_table(
    sweep: pd.DataFrame | RunsArg,
    calibration: Calibration | None = None,
    basis: Basis = "latency",
    rounding: Rounding = "none",
) -> pd.DataFrame:
    """Observed against predicted throughput, and effective concurrency, per sweep level.

    ``sweep`` is a sweep frame or runs. Without ``calibration``, the sweep's one-worker row
    (else its smallest N) is the calibration. Returns columns: connections, throughput_rps,
    predicted_rps, efficiency (observed / predicted), mean_latency_ms, latency_growth (R(N) /
    R(1)), n_eff (X · R̄), n_eff_ratio (n_eff / N), and the sweep's ``run``, ``requests`` and
    ``wall_s`` when present.
    """
    frame = sweep if isinstance(sweep, pd.DataFrame) else sweep_table(sweep)
    frame = frame.sort_values("connections", kind="stable").reset_index(drop=True).copy()
    if "throughput_rps" not in frame:
        frame["throughput_rps"] = frame["requests"] / frame["wall_s"]
    if calibration is None:
        calibration = calibration_from_sweep(frame)
    out = pd.DataFrame({"connections": frame["connections"].astype(int)})
    for column in ("run", "requests", "wall_s"):
        if column in frame:
            out[column] = frame[column]
    out["throughput_rps"] = frame["throughput_rps"].astype(float)
    out["predicted_rps"] = predicted_throughput(calibration, out["connections"], basis, rounding)
    out["efficiency"] = out["throughput_rps"] / out["predicted_rps"]
    latency_column = "mean_busy_ms" if "mean_busy_ms" in frame else "mean_latency_ms"
    if latency_column in frame:
        out["mean_latency_ms"] = frame[latency_column].astype(float)
        out["latency_growth"] = out["mean_latency_ms"] / (calibration.r1_s * 1e3)
        out["n_eff"] = out["throughput_rps"] * out["mean_latency_ms"] / 1e3
        out["n_eff_ratio"] = out["n_eff"] / out["connections"]
    return out
