"""Issue 14: the per-worker gaps come from one pass over the segments in file order
(loadgen_analysis.reductions.gaps), not from a window sorting every row. The two are independent
computations of the same numbers: a recorded run (in file order, so streamed) must give what a
shuffled copy of it gives (not in order, so the window computes it), to the last digit."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import loadgen_analysis as la
from loadgen_analysis.reductions import gaps
from loadgen_analysis.testing.synthetic import synthesise

from .conftest import Recorded


def _shuffled_copy(run: Path, out: Path) -> Path:
    """``run`` with each segment's rows in random order (metadata kept): no longer in each
    worker's order, so the gap functions must fall back to the window."""
    shutil.copytree(run, out)
    for segment in sorted((out / "requests").glob("*.parquet")):
        table = pq.read_table(segment)
        order = np.random.default_rng(14).permutation(table.num_rows)
        pq.write_table(table.take(order), segment)
    return out


def test_streamed_gaps_equal_the_window_on_a_shuffled_copy(
    error_run: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Several segments and tiny batches, so requests wait for their gap across both.
    run = synthesise(error_run.path, tmp_path / "run", 60_000, parallel=2, rows_per_segment=20_000)
    monkeypatch.setattr(gaps, "BATCH_ROWS", 997)
    shuffled = _shuffled_copy(run, tmp_path / "shuffled")
    (ordered_run,) = la.load_runs([run])
    mids = [0.0]
    gaps.scan_gaps([ordered_run], mids).close()  # in order: streamed
    with pytest.raises(gaps.OutOfOrderError):
        gaps.scan_gaps(la.load_runs([shuffled]), mids)

    def same(streamed: pd.DataFrame, windowed: pd.DataFrame) -> None:
        pd.testing.assert_frame_equal(
            streamed.drop(columns="run"), windowed.drop(columns="run"), check_dtype=False
        )

    same(la.worker_gaps(run), la.worker_gaps(shuffled))
    same(la.gap_summary(run), la.gap_summary(shuffled))
    summary = la.gap_summary(run).iloc[0]
    assert summary["requests_with_next"] == 60_000 - la.worker_gaps(run)["worker"].nunique()


def test_no_gap_file_is_left_behind(
    error_run: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOADGEN_ANALYSIS_TMP", str(tmp_path / "spill"))
    la.gap_summary(error_run.path)
    assert not list((tmp_path / "spill").glob("gaps-*"))
