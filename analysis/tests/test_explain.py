"""`loadgen-analyze explain`: the verdict and each check on the command line, on the data/
samples and on runs recorded by the real binaries; and the client evidence of run format 2
(CPU quota, throttling, the target interface, cores shared with the server)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import loadgen_analysis as la

from .conftest import CAPACITY_RPS, Recorded, run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


def _explain_json(*args: str | Path) -> dict:
    proc = run_cli("explain", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_sample_sweep_is_server_bound_with_the_bounds_model() -> None:
    out = _explain_json(DATA / "sweep-w8-10ms")
    assert out["verdict"] == "server" and out["strength"] == "strong"
    model = out["capacity_model"]
    assert model["name"] == "bounds"
    # 8 workers × 10 ms: X_max 800/s, knee at N = 8.
    assert model["x_max"] == pytest.approx(CAPACITY_RPS, rel=0.10)
    assert round(model["n_max"]) == 8
    assert model["r_squared"] > model["usl"]["r_squared"]
    assert [c["name"] for c in out["checks"]] == ["errors", "client", "network", "server"]
    assert all({"name", "status", "evidence", "values"} <= set(c) for c in out["checks"])


def test_sample_think_time_is_client_bound_in_text() -> None:
    proc = run_cli("explain", DATA / "think-time")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Verdict: client (strong)")
    assert [line.split("]")[1].split()[0] for line in lines[1:5]] == [
        "errors",
        "client",
        "network",
        "server",
    ]


def test_real_failing_run_is_errors(error_run: Recorded) -> None:
    out = _explain_json(error_run.path)
    assert out["verdict"] == "errors"
    assert out["run"] == str(error_run.path)
    client = next(c for c in out["checks"] if c["name"] == "client")
    assert client["values"]["client_cpu_p90"] is not None


@pytest.mark.parametrize(
    "args, message",
    [
        (("/nonexistent/run",), "no such run directory"),
        (("--link-capacity", "fast"), "is not a link capacity"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    run = () if args[0].startswith("/") else (str(DATA / "think-time"),)
    proc = run_cli("explain", *run, *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr


# --------------------------------------------------------------- client evidence, format 2


def _v2_copy(
    src: Path, dst: Path, client: dict, cpu: float | None = None, throttled: float | None = None
) -> Path:
    """A real run with run.json's `client` object and client-metrics' columns as record format
    2 writes them (AGREED-11). Values the real run measured are kept unless given."""
    shutil.copytree(src, dst)
    meta = json.loads((dst / "run.json").read_text())
    meta["client"] = {**meta.get("client", {}), **client}
    (dst / "run.json").write_text(json.dumps(meta))
    path = dst / "client-metrics.parquet"
    table = pq.read_table(path)
    rows = table.num_rows
    if cpu is not None:
        index = table.schema.get_field_index("cpu_utilisation")
        table = table.set_column(index, "cpu_utilisation", pa.array([cpu] * rows, pa.float64()))
    if throttled is not None:
        periods = [10] * rows  # 100 ms CFS periods in 1 s rows
        table = (
            table.append_column("nr_periods", pa.array(periods, pa.int64()))
            .append_column("nr_throttled", pa.array([round(10 * throttled)] * rows, pa.int64()))
            .append_column("throttled_ns", pa.array([int(throttled * 1e9)] * rows, pa.int64()))
        )
    pq.write_table(table, path)
    return dst


def test_throttled_quota_makes_the_client_the_limit(
    service_time_runs: dict[str, list[Path]], tmp_path: Path
) -> None:
    src = service_time_runs["5ms"][0]
    assert _explain_json(src)["verdict"] == "server"
    quota = {"cpu_quota_cores": 0.25, "cpu_limit_cores": 0.25, "cpu_quota_source": "cgroup-v2"}
    run = _v2_copy(src, tmp_path / "quota", quota, throttled=0.6)
    out = _explain_json(run)
    assert out["verdict"] == "client"
    assert "CPU quota of 0.25 cores" in out["summary"]
    client = next(c for c in out["checks"] if c["name"] == "client")
    assert client["values"]["throttled_share"] == pytest.approx(0.6)
    # A quota that throttles rarely is not the limit.
    light = _v2_copy(src, tmp_path / "light", quota, throttled=0.1)
    assert _explain_json(light)["verdict"] == "server"


def test_saturated_cores_shared_with_the_server_are_named(
    service_time_runs: dict[str, list[Path]], tmp_path: Path
) -> None:
    run = _v2_copy(
        service_time_runs["5ms"][0], tmp_path / "shared", {"server_shares_cores": True}, cpu=0.97
    )
    out = _explain_json(run)
    assert out["verdict"] == "client"
    assert "client and server share the cores" in out["summary"]
    apart = _v2_copy(
        service_time_runs["5ms"][1], tmp_path / "apart", {"server_shares_cores": False}, cpu=0.97
    )
    out = _explain_json(apart)
    assert out["verdict"] == "client"
    assert "share the cores" not in out["summary"]


def test_target_interface_counters_are_preferred_to_the_rows(
    service_time_runs: dict[str, list[Path]], tmp_path: Path
) -> None:
    # The target is on 127.0.0.1, so `lo` really carried its traffic: its counters are real.
    run = _v2_copy(service_time_runs["5ms"][2], tmp_path / "lo", {"target_interface": "lo"})
    network = la.attribute(run).finding("network")
    assert network.evidence["traffic_source"] == "interface lo"
    rows = la.attribute(service_time_runs["5ms"][2]).finding("network")
    assert rows.evidence["traffic_source"] == "request rows"
    # Loopback counts every byte once each way; at least the request bytes went out on it.
    assert network.evidence["peak_tx_bytes_per_s"] >= rows.evidence["peak_tx_bytes_per_s"] * 0.5
    capacity = network.evidence["peak_tx_bytes_per_s"] * 8 / 0.95
    meta = json.loads((run / "run.json").read_text())
    meta["client"]["link_capacity_bps"] = capacity  # as `loadgen run --link-capacity` records
    (run / "run.json").write_text(json.dumps(meta))
    assert _explain_json(run)["verdict"] == "network"


def test_names_the_client_evidence_reads_are_in_the_contract() -> None:
    # Issue 11: `cpu_utilization` was read from a file that has `cpu_utilisation`.
    from loadgen_analysis import client, contract

    names = set(contract.column_names("client_metrics"))
    version = int(contract.schema_version("client_metrics"))
    for since, columns in client.READS.items():
        if version >= since:
            assert set(columns) <= names, (since, set(columns) - names)
    paths = {f["path"] for f in contract.file("run_json")["fields"]}
    if "client.cpu_quota_cores" in paths:  # run.json's `client` object of AGREED-11
        assert set(client.RUN_JSON_READS) <= paths, set(client.RUN_JSON_READS) - paths
    assert "send_ns" in contract.column_names("requests")
