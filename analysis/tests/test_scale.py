"""Issue 14: the analysis holds aggregates, never rows, so its memory does not grow with the
run. A real recorded run is tiled into millions of rows (loadgen_analysis.testing.synthetic) and
``loadgen-analyze report`` — every reduction, the verdict and all plots — must stay within a
memory bound that a per-row pandas frame of the run would exceed. Memory, not time: the
machine is shared, so no assertion here depends on speed (bench/analysis-scale.sh measures
time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from loadgen_analysis.reductions.quantiles import exact_quantile_sets, exact_quantiles
from loadgen_analysis.testing.synthetic import synthesise

from .conftest import Recorded

ROWS = 4_000_000

#: DuckDB's memory limit for the child (the default is higher); what spills goes to tmp_path.
MEMORY_LIMIT_MB = 150


#: The notebooks' functions that are not part of ``loadgen-analyze report``, on the run given
#: as the argument (``phase_table`` used to hold every latency: out of memory at 10 M rows).
NOTEBOOK_FUNCTIONS = (
    "import sys, loadgen_analysis as la; run = la.load_runs(sys.argv[1:]); "
    "la.phase_table(run); la.worker_gaps(run); la.timeline(run); la.percentile_spectrum(run)"
)


def _peak_rss_mb(tmp_path: Path, *args: str | Path, code: str | None = None) -> float:
    """Peak RSS (MB) of ``loadgen-analyze ARGS…`` (or of Python running ``code`` with ARGS)
    run in a fresh child, measured by a wrapper process that has no other children
    (ru_maxrss of its waited-for children)."""
    command = "['-c', sys.argv[1]]" if code is not None else "['-m', 'loadgen_analysis.cli']"
    wrapper = (
        "import resource, subprocess, sys; "
        f"r = subprocess.run([sys.executable, *{command}, *sys.argv[1 + {code is not None}:]]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.exit(r.returncode)"
    )
    env = os.environ | {
        "LOADGEN_ANALYSIS_MEMORY": f"{MEMORY_LIMIT_MB}MB",
        "LOADGEN_ANALYSIS_TMP": str(tmp_path / "spill"),
    }
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *([code] if code is not None else []), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1]) / 1024  # Linux reports KiB


@pytest.fixture(scope="module")
def big(error_run: Recorded, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The error run tiled to :data:`ROWS` rows, in segments of a million."""
    out = synthesise(
        error_run.path, tmp_path_factory.mktemp("scale") / "big", ROWS, rows_per_segment=1_000_000
    )
    segments = sorted((out / "requests").glob("*.parquet"))
    assert sum(pq.read_metadata(s).num_rows for s in segments) == ROWS
    return out


def _per_row_frame_mb(big: Path) -> float:
    """What a per-row frame of the run needs at least: 8 bytes per column and row."""
    columns = len(pq.read_schema(next((big / "requests").glob("*.parquet"))).names)
    return ROWS * columns * 8 / 2**20


def test_report_on_millions_of_rows_needs_less_memory_than_holding_its_rows(
    error_run: Recorded, big: Path, tmp_path: Path
) -> None:

    small_mb = _peak_rss_mb(tmp_path, "report", error_run.path, "-o", tmp_path / "small.html")
    big_mb = _peak_rss_mb(tmp_path, "report", big, "-o", tmp_path / "big.html")
    assert "Verdict" in (tmp_path / "big.html").read_text()

    # A per-row frame of the run needs at least 8 bytes per column and row on top of what the
    # small run's report needs; allow the big run half of that.
    per_row_frame_mb = _per_row_frame_mb(big)
    assert big_mb - small_mb < per_row_frame_mb / 2, (
        f"report on {ROWS} rows peaked at {big_mb:.0f} MB, {big_mb - small_mb:.0f} MB more than "
        f"on {error_run.path.name} ({small_mb:.0f} MB); a per-row frame would need "
        f"{per_row_frame_mb:.0f} MB"
    )
    notebook_mb = _peak_rss_mb(tmp_path, big, code=NOTEBOOK_FUNCTIONS)
    assert notebook_mb - small_mb < per_row_frame_mb / 2, (
        f"the notebooks' functions on {ROWS} rows peaked at {notebook_mb:.0f} MB"
    )


def test_exact_quantiles_equal_duckdbs_quantile_disc() -> None:
    """The two-pass percentiles are quantile_disc's, value for value: heavy tails, ties, zeros,
    negative values (a gap can be), NULLs, a one-row group and extreme ranks."""
    rng = np.random.default_rng(14)
    n = 200_000
    frame = pd.DataFrame(
        {
            "g": rng.integers(0, 4, n),
            "h": rng.integers(0, 3, n),
            "x": rng.lognormal(12, 2, n).astype("int64") * rng.choice([1, 1, 1, -1], n),
        }
    )
    frame.loc[::7, "x"] = 0
    frame["x"] = frame["x"].astype("Int64")
    frame.loc[::11, "x"] = pd.NA
    frame.loc[n] = {"g": 9, "h": 9, "x": 42}
    con = duckdb.connect()
    con.register("d", frame)
    qs = [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.99999, 0.9999999]
    ours = exact_quantiles(con, "d", ["g", "h"], "x", qs).sort_values(["g", "h"])
    theirs = con.execute(
        f"SELECT g, h, quantile_disc(x, {qs}) AS q FROM d WHERE x IS NOT NULL "
        "GROUP BY g, h ORDER BY g, h"
    ).df()
    assert len(ours) == len(theirs) == 13
    for mine, reference in zip(ours["q"], theirs["q"], strict=True):
        assert list(mine) == list(reference)


def test_quantile_sets_equal_quantile_disc_per_grouping() -> None:
    """Several groupings of one relation in two passes in all (a report's run, op and
    per-second percentiles) give each grouping quantile_disc's values."""
    rng = np.random.default_rng(15)
    n = 100_000
    frame = pd.DataFrame(
        {
            "g": rng.integers(0, 3, n),
            "h": rng.choice(["a", "b", None], n),
            "s": rng.integers(0, 20, n),
            "x": rng.lognormal(10, 1.5, n).astype("int64"),
        }
    )
    frame.loc[::5, "x"] = 0
    con = duckdb.connect()
    con.register("d", frame)
    sets = [(["g"], [0.0, 0.5, 0.999]), (["g", "h"], [0.9, 0.99]), (["g", "s"], [0.5, 0.99])]
    ours = exact_quantile_sets(con, "d", ["g", "h", "s"], "x", sets)
    for (keys, qs), mine in zip(sets, ours, strict=True):
        by = ", ".join(keys)
        theirs = con.execute(
            f"SELECT {by}, quantile_disc(x, {qs}) AS q FROM d GROUP BY {by} ORDER BY {by}"
        ).df()
        mine = mine.sort_values(keys, na_position="last").reset_index(drop=True)
        assert len(mine) == len(theirs)
        for a, b in zip(mine["q"], theirs["q"], strict=True):
            assert list(a) == list(b)


def test_exports_of_millions_of_rows_hold_every_row_in_bounded_memory(
    error_run: Recorded, big: Path, tmp_path: Path
) -> None:
    """Issue 38: ``export --format csv|jsonl`` streams, so the big run's export needs less
    memory over the small run's than its rows would (docs/reference/exports.md has 10 M rows)."""
    for form in ("csv", "jsonl"):
        small_mb = _peak_rss_mb(
            tmp_path, "export", error_run.path, "--format", form, "-o", tmp_path / "s"
        )
        out = tmp_path / f"big.{form}"
        big_mb = _peak_rss_mb(tmp_path, "export", big, "--format", form, "-o", out)
        with out.open("rb") as text:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: text.read(1 << 24), b""))
        assert lines == ROWS + (form == "csv")  # the CSV's header line
        assert big_mb - small_mb < _per_row_frame_mb(big) / 2, (form, big_mb, small_mb)
        out.unlink()
