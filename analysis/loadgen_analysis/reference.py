"""Published figures the analysis is checked against (package data, ``reference_data/``), and
where the sample runs are (the few the package ships, ``samples/``; a checkout's ``data/runs``).

Responsible for reading the course reports' Little's-Law tables into the sweep-frame shape the
rest of the package uses, with the report's raw columns (threads, requests, wall time, mean
latency) kept apart from its derived ones (observed and predicted throughput, prefixed
``reported_``) so the analysis can recompute the latter from the former. Also reads the
Cisco benchmark data set of the USL literature.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .models.littles_law import Calibration, Rounding

#: How each report turned its calibration into a per-thread rate before multiplying by N, as
#: its provenance (data/README.md, "Published reference figures") records it.
REPORT_ROUNDING: dict[str, Rounding] = {
    # "the report rounded the per-thread throughput to 61" — 1 / 16.1414 ms = 61.95, cut to 61
    "twinder-littles-law.csv": "floor",
    # "14.7462 ms per request, 68 req/s" — 67.81 rounded to 68
    "skier-littles-law.csv": "round",
}


def default_reference_dir() -> Path:
    """The published tables the package ships (``loadgen_analysis/reference_data``)."""
    return Path(__file__).resolve().parent / "reference_data"


#: The sample runs the package ships, small enough to (links into data/runs in a checkout).
PACKAGED_SAMPLES = Path(__file__).resolve().parent / "samples"
#: A checkout's sample runs; not in the package.
CHECKOUT_SAMPLES = Path(__file__).resolve().parents[2] / "data" / "runs"


def sample_run(name: str) -> Path:
    """A sample run: one the package ships (``"think-time"``, notebook 03's default), else
    one of a checkout's ``data/runs`` (``"overview"``, ``"sweep-w8-10ms"``,
    ``"regression/baseline-5ms"``…: the notebooks' defaults when opened in a checkout)."""
    for root in (PACKAGED_SAMPLES, CHECKOUT_SAMPLES):
        if (root / name).is_dir():
            return root / name
    shipped = ", ".join(sorted(p.name for p in PACKAGED_SAMPLES.iterdir() if p.is_dir()))
    raise FileNotFoundError(
        f"the sample run {name!r} is not in this installation (the package ships {shipped}; "
        "the others are in a checkout's data/runs): give the notebook your own run, e.g. "
        "loadgen-analyze notebook 01 RUN"
    )


@dataclass(frozen=True)
class CourseTable:
    """A course report's Little's-Law table."""

    name: str
    #: One row per run: connections, requests, wall_s, mean_latency_ms (if reported),
    #: throughput_rps (recomputed: requests / wall_s), and the report's derived columns
    #: prefixed ``reported_``.
    sweep: pd.DataFrame
    #: The one-thread row.
    calibration: Calibration
    #: How the report rounded the per-thread rate.
    rounding: Rounding
    #: Decimals the report gave its observed throughput with (None: not rounded).
    observed_decimals: int | None


def read_course_table(path: str | Path) -> CourseTable:
    """Read ``twinder-littles-law.csv`` or ``skier-littles-law.csv`` (or one of their shape)."""
    path = Path(path)
    raw = pd.read_csv(path)
    sweep = pd.DataFrame()
    if "threads" in raw:
        sweep["connections"] = raw["threads"].astype(int)
    elif "max_threads" in raw:
        # A run that started fewer threads and grew counts at the size it grew to.
        sweep["connections"] = raw["max_threads"].astype(int)
        sweep["initial_connections"] = raw["initial_threads"].astype(int)
    else:
        raise ValueError(f"{path}: no threads or max_threads column")
    sweep["requests"] = raw["requests"].astype(int)
    sweep["wall_s"] = raw["wall_ms"] / 1e3
    sweep["throughput_rps"] = sweep["requests"] / sweep["wall_s"]
    for column in ("mean_ms", "median_ms", "p99_ms", "min_ms", "max_ms"):
        if column in raw:
            name = "mean_latency_ms" if column == "mean_ms" else column.replace("median", "p50")
            sweep[name] = raw[column].astype(float)
    sweep["reported_observed_rps"] = raw["observed_rps"].astype(float)
    sweep["reported_predicted_rps"] = raw["predicted_rps"].astype(float)

    one = sweep[sweep["connections"] == 1]
    if one.empty:
        raise ValueError(f"{path}: no one-thread calibration row")
    row = one.iloc[0]
    calibration = Calibration(
        workers=1,
        requests=int(row["requests"]),
        wall_s=float(row["wall_s"]),
        mean_latency_s=float(row["mean_latency_ms"]) / 1e3 if "mean_latency_ms" in row else None,
        source=path.name,
    )
    observed = raw["observed_rps"].astype(float)
    decimals = 0 if (observed == observed.round()).all() else None
    return CourseTable(
        name=path.stem,
        sweep=sweep,
        calibration=calibration,
        rounding=REPORT_ROUNDING.get(path.name, "none"),
        observed_decimals=decimals,
    )


def read_cisco(path: str | Path | None = None) -> pd.DataFrame:
    """The Cisco benchmark (concurrency, throughput) from *Practical Scalability Analysis with
    the Universal Scalability Law*, as usl4j's tests use it."""
    path = Path(path) if path is not None else default_reference_dir() / "cisco-usl.csv"
    frame = pd.read_csv(path)
    return frame.rename(columns={"concurrency": "connections", "throughput": "throughput_rps"})
