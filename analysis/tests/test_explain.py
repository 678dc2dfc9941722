"""`loadgen-analyze explain`: the verdict on the command line, on the data/ samples and on runs
recorded by the real binaries — a run's verdict is the engine's (run.json ``verdict``), shown
as it is; a sweep's adds what needs several runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import loadgen_analysis as la
from loadgen_analysis.testing import agreement, harness, unavailable
from loadgen_analysis.verdict.engine import ORDER

from .conftest import CAPACITY_RPS, Binaries, Recorded, ShardSet, run_cli

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
    assert re.search(r"workers thought 7\d% of the time, as configured", out["summary"]), out


def test_a_run_recorded_before_the_engine_decided_verdicts_is_not_measured(
    error_run: Recorded, tmp_path: Path
) -> None:
    # Issue 34: a run whose run.json has no `verdict` (request schema ≤ 5) is "not measured",
    # never judged again by the analysis.
    old = tmp_path / "old"
    shutil.copytree(error_run.path, old)
    meta = json.loads((old / "run.json").read_text())
    del meta["verdict"]
    (old / "run.json").write_text(json.dumps(meta))
    proc = run_cli("explain", old)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Verdict: inconclusive (weak) — not measured"), proc.stdout
    assert "request schema ≤ 5" in proc.stdout


def test_explain_shows_the_engines_verdict_as_it_is(error_run: Recorded, tmp_path: Path) -> None:
    """Whatever run.json's verdict says is what explain says: its cause, strength, summary,
    rule, numbers and phases (the analysis holds no rule of its own for one run)."""
    copy = tmp_path / "copy"
    shutil.copytree(error_run.path, copy)
    meta = json.loads((copy / "run.json").read_text())
    meta["verdict"] = {
        **meta["verdict"],
        "cause": "network",
        "strength": "weak",
        "rule": "network.transfer",
        "headline": "network (weak): receiving bodies took most of the time — next: a faster link",
        "summary": "receiving response bodies took 71.0% of latency",
        "evidence": ["receiving response bodies took 71.0% of latency", "no failures"],
        "numbers": {"transfer_share": 0.71},
        "phases": [
            {
                "phase": "g1",
                "cause": "none",
                "rule": "none.paced_by_workload",
                "workers_alive": 3.0,
                "busy_share": 0.1,
                "waiting_share": 0.9,
            }
        ],
    }
    (copy / "run.json").write_text(json.dumps(meta))
    out = _explain_json(copy)
    assert (out["verdict"], out["strength"]) == ("network", "weak")
    assert out["summary"] == "receiving response bodies took 71.0% of latency"
    assert (out["rule"], out["numbers"]) == ("network.transfer", {"transfer_share": 0.71})
    assert out["phases"][0]["verdict"] == "none" and "no failures" in out["notes"]
    text = run_cli("explain", copy).stdout
    assert text.startswith(
        "Verdict: network (weak): receiving bodies took most of the time — next: a faster link\n"
        "  why: receiving response bodies took 71.0%"
    ), text
    assert "phase g1: none" in text


def test_real_failing_run_is_errors(error_run: Recorded) -> None:
    out = _explain_json(error_run.path)
    assert out["verdict"] == "errors" and out["rule"] == "errors.share"
    assert out["run"] == str(error_run.path)
    run_json = json.loads((error_run.path / "run.json").read_text())
    assert out["summary"] == run_json["verdict"]["summary"]
    assert out["numbers"]["error_rate"] > 0.01
    # The engine's one line, shown as it is, with the numbers below it (issue 61).
    line = run_json["verdict"]["headline"]
    assert out["line"] == line and len(line) <= 120, line
    assert line.startswith("errors (strong): ") and " — next: " in line, line
    text = run_cli("explain", error_run.path).stdout.splitlines()
    assert text[:2] == [f"Verdict: {line}", f"  why: {out['summary']}"], text


@pytest.mark.parametrize(
    "args, message",
    [
        (("/nonexistent/run",), "no such run directory"),
        (("--link-capacity", "1gbit"), "unrecognized arguments: --link-capacity"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    run = () if args[0].startswith("/") else (str(DATA / "sweep-w8-10ms"),)
    proc = run_cli("explain", *run, *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr


def test_send_time_is_not_read_as_server_wait(service_time_runs: dict[str, list[Path]]) -> None:
    # Record schema 2 has send_ns: the server's share of time to first byte is what follows the
    # last request byte. A GET sends a few hundred bytes, so sending is a sliver of latency.
    run = service_time_runs["50ms"][0]
    assert la.load_run(run).schema_version >= 2
    components = la.latency_components(run)
    assert components["send_ms"].notna().all()
    total = components[["connect_ms", "send_ms", "first_byte_ms", "transfer_ms"]].sum(axis=1)
    assert total.to_numpy() == pytest.approx(components["mean_latency_ms"].to_numpy(), rel=1e-9)
    numbers = la.attribute(run).numbers  # the engine's, from the same rows
    weights = components["responses"]
    ttfb_share = (components["mean_ttfb_ms"] * weights).sum() / (
        components["mean_latency_ms"] * weights
    ).sum()
    assert numbers["server_wait_share"] <= ttfb_share + 1e-9
    assert numbers["server_wait_share"] == pytest.approx(
        (components["first_byte_ms"] * weights).sum()
        / (components["mean_latency_ms"] * weights).sum(),
        rel=1e-3,
    )
    assert numbers["send_share"] < 0.5


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
        unavailable.missing(
            "cgroup", "no writable cgroup CPU controller (needs root and a cpu controller)"
        )
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
    assert result["rule"] == "client.cpu" and "quota" in result["summary"], result["summary"]


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
    # Part 8: capacity's output (--json prints capacity.json), capacity.json, explain and the
    # report's verdict box give one cause; and so do a failing level's.
    agreed = agreement.check(capacity_search, capacity, out)
    assert set(agreed) == {"console", "capacity.json", "explain", "report"}
    for level in capacity["levels"]:
        verdict = _explain_json(level["run_dir"])
        if level["passed"]:
            assert verdict["verdict"] == "none", verdict
        else:
            assert verdict["verdict"] == level["cause"], (level["reasons"], verdict)
            assert verdict["verdict"] != "none"
            crossed = [s["slo"] for s in level["slos"] if s["outcome"] != "pass"]
            assert all(slo in verdict["summary"] for slo in crossed), verdict["summary"]
            printed = {"verdict": {"cause": level["cause"]}}
            agreement.check(Path(level["run_dir"]), printed, verdict)


def test_a_shard_sets_verdict_is_the_first_cause_of_its_shards(
    shard_sets: dict[str, ShardSet], tmp_path: Path
) -> None:
    """Issue 34 part 1: each shard decided its own verdict; the merged run's is the first
    cause, in the checks' order, among them — a shard that failed speaks for the set."""
    shards = shard_sets["open"].shards
    causes = [json.loads((s / "run.json").read_text())["verdict"]["cause"] for s in shards]
    out = _explain_json(shard_sets["open"].folder)
    assert out["verdict"] == min(causes, key=ORDER.index), (causes, out)
    assert sum(note.startswith("shard ") for note in out["notes"]) == len(shards)
    # One shard's verdict turned to errors: the set's is errors.
    folder = tmp_path / "set"
    for shard in shards:
        shutil.copytree(shard, folder / shard.name)
    first = folder / shards[0].name / "run.json"
    meta = json.loads(first.read_text())
    meta["verdict"] = {**meta["verdict"], "cause": "errors", "summary": "12% failed"}
    first.write_text(json.dumps(meta))
    out = _explain_json(folder)
    assert (out["verdict"], out["summary"]) == ("errors", "12% failed")
