"""``loadgen-analyze export`` (issue 38 part 4) on a real open-model run: CSV and JSON lines hold
every Parquet row with the contract's columns, and the HdrHistogram interval log, read back with
the ``hdrhistogram`` package's own reader, gives the run's p50/p99 per op (the latency from
the intended send) within the histogram's precision. Memory at 10 M rows is measured once for
the docs (docs/reference/exports.md), not here: these runs are short.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import duckdb
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hdrh.log import HistogramLogReader

from loadgen_analysis.cli import main
from loadgen_analysis.export.hlog import new_histogram, tag
from loadgen_analysis.io import contract
from loadgen_analysis.io.engine import connect
from loadgen_analysis.io.load import load_runs
from loadgen_analysis.testing import harness

from .conftest import Binaries


@pytest.fixture(scope="module")
def open_run(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 s at 500 req/s against a 2 ms server: latency from the intended send."""
    out = tmp_path_factory.mktemp("export") / "run"
    with harness.Server(("--service-time", "2ms"), binary=binaries.server) as server:
        command = [binaries.loadgen, "run", "--url", server.url + "/", "--rate", "500", "-d", "2s"]
        subprocess.run([*command, "--no-progress", "--out", out], check=True, timeout=60)
    return out


def _parquet(run: Path):
    return pq.read_table(sorted((run / "requests").glob("*.parquet")))


def test_csv_and_jsonl_hold_every_row_with_the_contracts_columns(open_run, tmp_path) -> None:
    rows = _parquet(open_run)
    names = contract.column_names("requests")
    assert main(["export", str(open_run), "--format", "csv", "-o", str(tmp_path / "r.csv")]) == 0
    table = pacsv.read_csv(tmp_path / "r.csv")
    assert table.column_names == names
    assert table.num_rows == rows.num_rows > 500
    assert table["latency_ns"].to_pylist() == rows["latency_ns"].to_pylist()
    assert table["op"].to_pylist() == rows["op"].cast("string").to_pylist()

    assert (
        main(["export", str(open_run), "--format", "jsonl", "-o", str(tmp_path / "r.jsonl")]) == 0
    )
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(lines) == rows.num_rows
    assert all(list(line) == names for line in lines)
    assert [line["intended_ns"] for line in lines] == rows["intended_ns"].to_pylist()
    assert not list(tmp_path.glob("*.partial"))


def test_the_hlog_read_back_gives_the_runs_p50_and_p99(open_run, tmp_path) -> None:
    out = tmp_path / "r.hlog"
    assert main(["export", str(open_run), "--format", "hlog", "-o", str(out)]) == 0
    reader = HistogramLogReader(str(out), new_histogram())
    merged: dict[str, object] = {}
    intervals = 0
    while (interval := reader.get_next_interval_histogram()) is not None:
        intervals += 1
        merged.setdefault(interval.get_tag(), new_histogram()).add(interval)
    assert intervals >= 2  # one a second
    exact = duckdb.sql(
        "SELECT CAST(op AS VARCHAR) AS op, "
        "list(start_ns + latency_ns - least(intended_ns, start_ns)) AS v "
        f"FROM read_parquet('{open_run}/requests/*.parquet') WHERE status > 0 GROUP BY 1"
    ).fetchall()
    summary = {
        o["op"]: o["latency"]
        for o in json.loads((open_run / "run.json").read_text())["summary"]["ops"]
    }
    for op, values in exact:
        histogram = merged[tag(op)]
        values.sort()
        assert histogram.get_total_count() == len(values)
        for q, key in ((0.5, "p50_ns"), (0.99, "p99_ns")):
            rank = math.ceil(q * len(values))  # the ⌈q·n⌉-th smallest, as loadgen's
            from_hlog = histogram.get_value_at_percentile(100 * rank / len(values))
            assert histogram.values_are_equivalent(from_hlog, values[rank - 1]), (op, q)
            assert histogram.values_are_equivalent(from_hlog, summary[op][key]), (op, q)


def test_a_sharded_runs_rows_are_rebased_as_the_analysis_reads_them(shard_sets, tmp_path) -> None:
    """One file of a shard set, its times on the earliest shard's anchor (as ``connect``'s)."""
    folder = shard_sets["closed"].folder
    assert main(["export", str(folder), "--format", "csv", "-o", str(tmp_path / "r.csv")]) == 0
    exported = sorted(pacsv.read_csv(tmp_path / "r.csv")["start_ns"].to_pylist())
    con = connect(load_runs([folder]))
    assert exported == sorted(v for (v,) in con.execute("SELECT start_ns FROM records").fetchall())
    assert len(exported) == 600
