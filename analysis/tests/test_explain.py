"""`loadgen-analyze explain`: the verdict and each check on the command line, on the data/
samples and on runs recorded by the real binaries; and the client evidence of run format 2
(CPU quota, throttling, the target interface, cores shared with the server)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import loadgen_analysis as la
from loadgen_analysis.testing import harness

from .conftest import CAPACITY_RPS, Binaries, Recorded, run_cli

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


def test_sample_think_time_is_paced_by_its_think_time() -> None:
    # Issue 39: data/runs/think-time, recorded in today's schema, has the workers' time: its
    # workers thought 75 % of the time, as configured — a verdict, not a caveat.
    out = _explain_json(DATA / "think-time")
    assert (out["verdict"], out["strength"]) == ("none", "strong"), out["summary"]
    assert "workers thought 75%" in out["summary"], out["summary"]


def test_a_run_recorded_before_the_workers_time_is_not_measured(tmp_path: Path) -> None:
    # Issue 25: a run recorded before the engine's worker clocks (request schema ≤ 3: no
    # summary.workers in run.json) whose workers were idle 75 % between requests: the rows
    # cannot tell that from a client holding them back — "not measured", never a wrong verdict.
    old = tmp_path / "think-time"
    shutil.copytree(DATA / "think-time", old)
    run_json = json.loads((old / "run.json").read_text())
    del run_json["summary"]["workers"]
    (old / "run.json").write_text(json.dumps(run_json))
    proc = run_cli("explain", old)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Verdict: inconclusive (weak)"), proc.stdout
    client = next(line for line in lines if "] client" in line)
    assert "not measured" in client and "schema ≤ 3" in client, proc.stdout
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
    2 writes them (both in contract/files.json). Values the real run measured are kept unless
    given."""
    shutil.copytree(src, dst)
    meta = json.loads((dst / "run.json").read_text())
    meta["client"] = {**meta.get("client", {}), **client}
    (dst / "run.json").write_text(json.dumps(meta))
    path = dst / "client-metrics.parquet"
    table = pq.read_table(path)
    rows = table.num_rows
    columns: dict[str, pa.Array] = {}
    if cpu is not None:
        columns["cpu_utilisation"] = pa.array([cpu] * rows, pa.float64())
    if throttled is not None:  # 10 CFS periods of 100 ms in each 1 s row
        columns["nr_periods"] = pa.array([10] * rows, pa.int64())
        columns["nr_throttled"] = pa.array([round(10 * throttled)] * rows, pa.int64())
        columns["throttled_ns"] = pa.array([int(throttled * 1e9)] * rows, pa.int64())
    for name, values in columns.items():
        index = table.schema.get_field_index(name)
        table = (
            table.set_column(index, name, values)
            if index >= 0
            else table.append_column(name, values)
        )
    pq.write_table(table, path)
    return dst


def test_throttled_quota_makes_the_client_the_limit(
    service_time_runs: dict[str, list[Path]], tmp_path: Path
) -> None:
    src = service_time_runs["5ms"][0]
    # One level of a 5 ms server: the time is spent at the server, which one level cannot
    # show to be its capacity (issue 34).
    assert _explain_json(src)["verdict"] == "inconclusive"
    quota = {"cpu_quota_cores": 0.25, "cpu_limit_cores": 0.25, "cpu_quota_source": "cgroup-v2"}
    # The engine judged the quota saturated (its rule, issue 34: the analysis shows it with
    # the numbers, never judges again).
    judged = {**quota, "saturated": True, "saturation": "cpu-quota"}
    run = _v2_copy(src, tmp_path / "quota", judged, throttled=0.6)
    out = _explain_json(run)
    assert out["verdict"] == "client"
    assert "CPU quota of 0.25 cores" in out["summary"]
    assert "the run's console judged it saturated" in out["summary"]
    client = next(c for c in out["checks"] if c["name"] == "client")
    assert client["values"]["throttled_share"] == pytest.approx(0.6)
    # The same throttling the engine did not judge saturating is evidence, not the limit:
    # the analysis has no threshold of its own to judge it by.
    unjudged = {**quota, "saturated": False, "saturation": None}
    light = _v2_copy(src, tmp_path / "light", unjudged, throttled=0.6)
    out = _explain_json(light)
    assert out["verdict"] == "inconclusive"
    client = next(c for c in out["checks"] if c["name"] == "client")
    assert client["values"]["throttled_share"] == pytest.approx(0.6)


def test_saturated_cores_shared_with_the_server_are_named(
    service_time_runs: dict[str, list[Path]], tmp_path: Path
) -> None:
    busy = {"saturated": True, "saturation": "cpu"}  # the engine's verdict on a busy client
    run = _v2_copy(
        service_time_runs["5ms"][0],
        tmp_path / "shared",
        {**busy, "server_shares_cores": True},
        cpu=0.97,
    )
    out = _explain_json(run)
    assert out["verdict"] == "client"
    assert "client and server share the cores" in out["summary"]
    apart = _v2_copy(
        service_time_runs["5ms"][1],
        tmp_path / "apart",
        {**busy, "server_shares_cores": False},
        cpu=0.97,
    )
    out = _explain_json(apart)
    assert out["verdict"] == "client"
    assert "share the cores" not in out["summary"]


def test_target_interface_counters_are_preferred_to_the_rows_except_on_lo(
    service_time_runs: dict[str, list[Path]], tmp_path: Path
) -> None:
    # The binary records the interface of the target's route: 127.0.0.1 goes out on `lo`.
    src = service_time_runs["5ms"][2]
    assert json.loads((src / "run.json").read_text())["client"]["target_interface"] == "lo"
    # Issue 25: lo's counters hold both ends of every local flow and other processes' traffic,
    # so the rows' bytes are the measure there, and the evidence says so.
    network = la.attribute(src).finding("network")
    assert network.evidence["traffic_source"].startswith("request rows; the target is on lo")
    # Another interface the samples saw: its counters are read.
    metrics = pq.read_table(src / "client-metrics.parquet").to_pylist()
    others = sorted({n["interface"] for row in metrics for n in row["network"]} - {"lo"})
    if others:
        moved = _v2_copy(src, tmp_path / "other", {"target_interface": others[0]})
        found = la.attribute(moved).finding("network").evidence["traffic_source"]
        assert found == f"interface {others[0]}"
    # An interface the samples never saw: the rows' bytes stand in.
    gone = _v2_copy(src, tmp_path / "gone", {"target_interface": "no-such-if0"})
    rows = la.attribute(gone).finding("network")
    assert rows.evidence["traffic_source"] == "request rows"
    # A recorded capacity (as `loadgen run --link-capacity` writes it) that the busier
    # direction fills to 95 % makes the network the limit.
    busier = max(network.evidence["peak_tx_bytes_per_s"], network.evidence["peak_rx_bytes_per_s"])
    full = _v2_copy(src, tmp_path / "full", {"link_capacity_bps": int(busier * 8 / 0.95)})
    assert _explain_json(full)["verdict"] == "network"


def test_names_the_client_evidence_reads_are_in_the_contract() -> None:
    # Issue 11: `cpu_utilization` was read from a file that has `cpu_utilisation`.
    from loadgen_analysis.io import contract
    from loadgen_analysis.verdict import client_evidence as client

    names = set(contract.column_names("client_metrics"))
    version = int(contract.schema_version("client_metrics"))
    for since, columns in client.READS.items():
        if version >= since:
            assert set(columns) <= names, (since, set(columns) - names)
    paths = {f["path"] for f in contract.file("run_json")["fields"]}
    if "client.cpu_quota_cores" in paths:  # run.json's `client` object, as the contract has it
        assert set(client.RUN_JSON_READS) <= paths, set(client.RUN_JSON_READS) - paths
    assert "send_ns" in contract.column_names("requests")


def test_send_time_is_not_read_as_server_wait(service_time_runs: dict[str, list[Path]]) -> None:
    # Record schema 2 has send_ns: the server's share of time to first byte is what follows the
    # last request byte. A GET sends a few hundred bytes, so sending is a sliver of latency.
    run = service_time_runs["50ms"][0]
    assert la.load_run(run).schema_version >= 2
    components = la.latency_components(run)
    assert components["send_ms"].notna().all()
    total = components[["connect_ms", "send_ms", "first_byte_ms", "transfer_ms"]].sum(axis=1)
    assert total.to_numpy() == pytest.approx(components["mean_latency_ms"].to_numpy(), rel=1e-9)
    result = la.attribute(run)
    server = result.finding("server").evidence
    assert server["server_wait_share"] <= server["ttfb_share"]
    assert result.finding("network").evidence["send_share"] < 0.5


def _cpu_cgroup(tmp_name: str) -> Path | None:
    """A fresh cgroup with a 0.05-core CPU quota (v1 cpu controller or v2 cpu.max), or None
    where this process may not make one (not root, no CPU controller)."""
    v1 = Path("/sys/fs/cgroup/cpu")
    v2 = Path("/sys/fs/cgroup")
    try:
        if (v1 / "cpu.cfs_quota_us").is_file():
            group = v1 / tmp_name
            group.mkdir()
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text("5000")
            return group
        if "cpu" in (v2 / "cgroup.controllers").read_text().split():
            group = v2 / tmp_name
            group.mkdir()
            (group / "cpu.max").write_text("5000 100000")
            return group
    except OSError:
        return None
    return None


def test_real_cpu_quota_run_is_client_and_says_quota(binaries: Binaries, tmp_path: Path) -> None:
    # Issue 11: under a 0.25-core quota the analysis said "server". The real binary, in a real
    # cgroup, against a real server; skipped where cgroups cannot be made. 0.05 cores, so the
    # client is throttled even on a machine too busy to give it a quarter of a core.
    group = _cpu_cgroup(f"loadgen-test-{tmp_path.name}")
    if group is None:
        pytest.skip("no writable cgroup CPU controller here (needs root and a cpu controller)")
    out = tmp_path / "quota"
    try:
        with harness.Server(("--service-time", "1ms"), binary=binaries.server) as server:
            command = (
                f"echo $$ > {group}/cgroup.procs && exec {binaries.loadgen} run "
                f"--url {server.url}/ -c 50 -d 3s --out {out} --no-progress"
            )
            subprocess.run(["sh", "-c", command], check=True, timeout=120, capture_output=True)
    finally:
        group.rmdir()
    result = _explain_json(out)
    assert result["verdict"] == "client", result["summary"]
    assert "CPU quota of 0.05 cores" in result["summary"]


@pytest.fixture(scope="module")
def capacity_search(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`loadgen capacity` against one worker of 20 ms (50 req/s): 40 req/s passes, 80 fails."""
    out = tmp_path_factory.mktemp("capacity") / "search"
    args = ("--service-time", "20ms", "--workers", "1")
    with harness.Server(args, binary=binaries.server) as server:
        search = ("--slo", "p99<100ms", "--start-rate", "40", "--tolerance", "50%")
        search += ("--level-duration", "1500ms", "--warmup", "300ms", "--confirm-levels", "1")
        search += ("--cool-down", "500ms", "--budget", "60s", "--allow-unconverged")
        search += ("--no-progress", "--json", "--out", str(out))
        subprocess.run(
            [str(binaries.loadgen), "capacity", "--url", server.url + "/", *search],
            capture_output=True,
            timeout=120,
            check=True,
        )
    return out


def test_explain_says_what_capacity_decided_on_its_directory_and_its_levels(
    capacity_search: Path,
) -> None:
    """Issue 34: capacity and explain agree by construction — explain on the capacity
    directory gives capacity.json's limited_by and answer; on a level's directory, the cause
    the search gave that level (a failed level is never "none")."""
    capacity = json.loads((capacity_search / "capacity.json").read_text())
    out = _explain_json(capacity_search)
    assert capacity["limited_by"] in ("server", "client"), capacity["answer"]
    assert out["verdict"] == capacity["limited_by"]
    assert out["summary"] == capacity["answer"]
    for level in capacity["levels"]:
        verdict = _explain_json(level["run_dir"])
        if level["passed"]:
            assert verdict["verdict"] == "none", verdict
        else:
            assert verdict["verdict"] == level["cause"], (level["reasons"], verdict)
            assert verdict["verdict"] != "none"
