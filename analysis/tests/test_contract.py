"""The contract file against real files: a ``loadgen run``, ``sweep`` and ``capacity`` by the
debug binaries against ``loadgen-server`` on 127.0.0.1, and the capacity sample in
``data/runs``, read back with pyarrow and json. Which files a directory holds is the
contract's (each file's ``path``), and every file of the contract is held to a real one.
A column or field renamed on the Rust side fails here; one renamed in the contract fails
in Rust too (loadgen/tests/contract.rs)."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loadgen_analysis.io import contract
from loadgen_analysis.io.rules import verdict_rules
from loadgen_analysis.testing import harness
from loadgen_analysis.verdict.engine import ORDER
from loadgen_analysis.verdict.findings import Evidence, Thresholds
from loadgen_analysis.verdict.server_check import check_server

from .conftest import Binaries, record, run_cli


def _metadata(path: Path) -> dict[str, str]:
    raw = pq.read_metadata(path).metadata or {}
    return {k.decode(): v.decode() for k, v in raw.items()}


#: The contract's files in a run directory, in a sweep's and in a capacity search's (whose
#: levels are run directories).
RUN_FILES = {"requests", "client_metrics", "run_json"}
#: With ``--server-metrics``, a run directory holds the server's samples too.
SERVER_FILES = {"server_metrics"}
SWEEP_FILES = {"sweep_json"}
CAPACITY_FILES = {"capacity_json"}

SAMPLE_CAPACITY = Path(__file__).resolve().parents[2] / "data" / "runs" / "capacity-w8-10ms"


def _file_problems(name: str, path: Path) -> list[str]:
    """One file against its entry in the contract, read as the entry's ``format`` says."""
    if contract.file(name)["format"] == "parquet":
        schema = contract.schema_problems(name, pq.read_schema(path))
        return schema + contract.metadata_problems(name, _metadata(path))
    return contract.json_problems(name, json.loads(path.read_text()))


def _check_dir(directory: Path, expected: set[str]) -> list[str]:
    """The contract's files found in ``directory`` (each entry's ``path`` there) must be
    ``expected``; returns what differs from the contract in them."""
    found = {name: sorted(directory.glob(contract.file(name)["path"])) for name in contract.names()}
    found = {name: paths for name, paths in found.items() if paths}
    assert set(found) == expected, f"{directory}: the contract's files {sorted(found)}"
    return [
        p for name, paths in found.items() for path in paths for p in _file_problems(name, path)
    ]


def _check_run_dir(run_dir: Path, extra: frozenset[str] = frozenset()) -> list[str]:
    return _check_dir(run_dir, RUN_FILES | extra)


def _loadgen(binaries: Binaries, *args: str) -> None:
    subprocess.run(
        [str(binaries.loadgen), *args, "--no-progress", "--json"],
        capture_output=True,
        timeout=120,
        check=True,
    )


@pytest.fixture(scope="module")
def contract_runs(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A closed run, an open run and a two-level sweep, against one server."""
    root = tmp_path_factory.mktemp("contract")
    with harness.Server(("--service-time", "1ms"), binary=binaries.server) as server:
        url = server.url + "/"
        closed_run = ("-c", "2", "-n", "300", "--trace", "--out", str(root / "closed"))
        _loadgen(binaries, "run", "--url", url, *closed_run)
        open_run = ("--rate", "100", "-d", "1500ms", "--out", str(root / "open"))
        open_run += ("--server-metrics", server.url + "/metrics")
        _loadgen(binaries, "run", "--url", url, *open_run)
        sweep = ("--levels", "1,2", "-n", "100", "--out", str(root / "sweep"))
        _loadgen(binaries, "sweep", "--url", url, *sweep)
        # Checks and chaining: a `check` column with values, skipped requests in run.json.
        checks = ("-s", "albums-chained", "--set", "model.startup.iterations=1")
        checks += ("--set", "model.groups=1", "--set", "model.iterations=2")
        checks += ("--set", 'requests.new_album.check=[{json="/imageSize", equals="1"}]')
        _loadgen(binaries, "run", "--url", url, *checks, "--out", str(root / "checks"))
        # Two short levels: a ceiling of 50 req/s that the server meets.
        capacity = ("--slo", "p99<1s", "--max-rate", "50", "--level-duration", "1s")
        capacity += ("--warmup", "300ms", "--confirm-levels", "1", "--cool-down", "0s")
        _loadgen(binaries, "capacity", "--url", url, *capacity, "--out", str(root / "capacity"))
    return {
        "closed": root / "closed",
        "open": root / "open",
        "sweep": root / "sweep",
        "checks": root / "checks",
        "capacity": root / "capacity",
    }


@pytest.mark.parametrize("kind", ["closed", "open", "checks"])
def test_a_real_run_matches_the_contract(contract_runs: dict[str, Path], kind: str) -> None:
    extra = frozenset(SERVER_FILES if kind == "open" else ())
    assert _check_run_dir(contract_runs[kind], extra) == []
    if kind == "closed":
        traced = pq.read_table(contract_runs[kind] / "requests", columns=["trace_id"])
        assert traced.column("trace_id").null_count == 0


def test_a_real_sweep_matches_the_contract(contract_runs: dict[str, Path]) -> None:
    assert _check_dir(contract_runs["sweep"], SWEEP_FILES) == []
    sweep = json.loads((contract_runs["sweep"] / "sweep.json").read_text())
    assert len(sweep["levels"]) == 2
    for level in sweep["levels"]:
        assert _check_run_dir(Path(level["run_dir"])) == []


def test_a_real_capacity_search_matches_the_contract(contract_runs: dict[str, Path]) -> None:
    assert _check_dir(contract_runs["capacity"], CAPACITY_FILES) == []
    capacity = json.loads((contract_runs["capacity"] / "capacity.json").read_text())
    assert capacity["capacity_rps"] == 50.0
    for level in capacity["levels"]:
        assert _check_run_dir(Path(level["run_dir"])) == []


def test_the_capacity_sample_matches_the_contract() -> None:
    """``data/runs/capacity-w8-10ms`` is what notebook 02 and docs/analysis.md read; when
    capacity.json changes, re-record it (``data/record-samples.sh capacity``)."""
    assert _check_dir(SAMPLE_CAPACITY, CAPACITY_FILES) == []
    capacity = json.loads((SAMPLE_CAPACITY / "capacity.json").read_text())
    assert len(capacity["levels"]) >= 2 and capacity["capacity_rps"] > 0


def test_every_file_of_the_contract_is_held_to_a_real_one() -> None:
    """A file added to the contract fails here until a test above reads a real one."""
    held = RUN_FILES | SERVER_FILES | SWEEP_FILES | CAPACITY_FILES | {"history_run"}
    assert held == set(contract.names()), f"not held to a real file: {set(contract.names()) - held}"


def test_a_history_store_file_matches_the_contract(
    contract_runs: dict[str, Path], tmp_path: Path
) -> None:
    """``loadgen-analyze history add`` (Python, not loadgen) writes the contract's
    ``history_run``: an open run (latency from the intended send) and a capacity search."""
    store = tmp_path / "history"
    for kind in ("open", "capacity"):
        proc = run_cli("history", "add", contract_runs[kind], "--store", store)
        assert proc.returncode == 0, proc.stderr
    files = sorted(store.glob("*.parquet"))
    assert len(files) == 2
    for path in files:
        schema = pq.read_schema(path)
        assert contract.schema_problems("history_run", schema, narrowed_ok=True) == []
        assert contract.metadata_problems("history_run", _metadata(path)) == []
    rows = [row for p in files for row in pq.read_table(p).to_pylist()]
    assert {r["latency_from"] for r in rows} == {"intended send", None}
    assert [r["capacity_rps"] for r in rows if r["kind"] == "capacity"] == [50.0]


def test_the_columns_the_analysis_requires_come_from_the_contract() -> None:
    """Every segment must have the columns of schema version 1: the contract's columns less
    those a later version added ("Since schema version N"), never a list typed again."""
    from loadgen_analysis.io.load import REQUIRED_COLUMNS, SUPPORTED_SCHEMA_VERSIONS

    requests = contract.column_names("requests")
    assert set(REQUIRED_COLUMNS) <= set(requests)
    assert {"start_ns", "latency_ns", "op", "status", "worker", "attempt"} <= set(REQUIRED_COLUMNS)
    assert {"send_ns", "check"}.isdisjoint(REQUIRED_COLUMNS)
    assert max(SUPPORTED_SCHEMA_VERSIONS) == int(contract.schema_version("requests"))
    assert "cpu_utilisation" in contract.column_names("client_metrics")
    assert "client.saturated" in contract.fields("run_json")


def test_a_narrowed_nullability_passes_only_where_asked_and_never_widened() -> None:
    """A history file DuckDB wrote declares a column without a null REQUIRED: allowed there
    (``narrowed_ok``) for a column the contract lets be null, never for a non-null one made
    nullable, and nowhere else."""
    columns = contract.columns("history_run")
    narrowed = pa.schema([pa.field(c.name, _ARROW[c.type], nullable=False) for c in columns])
    assert contract.schema_problems("history_run", narrowed, narrowed_ok=True) == []
    assert any(
        "nullable False, contract True" in p
        for p in contract.schema_problems("history_run", narrowed)
    )
    widened = pa.schema([pa.field(c.name, _ARROW[c.type], nullable=True) for c in columns])
    problems = contract.schema_problems("history_run", widened, narrowed_ok=True)
    assert "history_run.run_id: nullable True, contract False" in problems


_ARROW = {"int64": pa.int64(), "float64": pa.float64(), "utf8": pa.string()}


def test_a_renamed_column_or_field_is_reported() -> None:
    names = contract.column_names("requests")
    fields = [pa.field(n if n != "ttfb_ns" else "ttfb", pa.int64()) for n in names]
    problems = contract.schema_problems("requests", pa.schema(fields))
    assert any("ttfb" in p for p in problems)
    document = {
        "kind": "sweep",
        "model": "closed",
        "calibration_r1_ns": None,
        "levels": [
            {
                "level": 1.0,
                "run_dir": "x",
                "requests": 1,
                "failed": 0,
                "throughput_rps": 1.0,
                "mean_latency_ns": 1.0,
                "p99_latency_ns": 1,
                "n_eff": 1.0,
                "predicted_rps": None,
                "verdict": "server",
            }
        ],
    }
    assert contract.json_problems("sweep_json", document) == []
    document["levels"][0]["n_effective"] = document["levels"][0].pop("n_eff")
    problems = contract.json_problems("sweep_json", document)
    assert "levels[].n_effective is not in the contract" in problems
    assert "levels[].n_eff is missing" in problems
    document["levels"][0]["requests"] = "1"
    assert any("levels[].requests" in p for p in contract.json_problems("sweep_json", document))


def test_the_queue_vectors_straddle_the_contracts_thresholds() -> None:
    """``contract/verdict.json``'s ``queue_vectors`` (issue 44), which the engine's rule is held
    to (``loadgen/src/verdict/queueing.rs``): each of the three thresholds has a vector on it
    and one beside it, and every vector names one of the three answers — so a threshold moved
    in the contract moves a vector's answer, and the Rust test fails until both agree."""
    rules = verdict_rules()
    vectors = rules["queue_vectors"]
    assert rules["no_queue_latency_ratio"] < rules["queueing_latency_ratio"]
    assert {v["queue"] for v in vectors} == {"waited", "no_wait", None}
    ratios = {v["latency_ratio"] for v in vectors}
    at_once = {v["served_at_once"] for v in vectors}
    for name, seen in (
        ("queueing_latency_ratio", ratios),
        ("no_queue_latency_ratio", ratios),
        ("min_served_at_once", at_once),
    ):
        threshold = rules[name]
        assert threshold in seen, name
        assert any(abs(x - threshold) <= 0.02 and x != threshold for x in seen), name
        assert name in rules["meanings"], name


def test_the_probe_vectors_straddle_the_contracts_thresholds() -> None:
    """``contract/verdict.json``'s ``probe_vectors`` (issue 44, ``loadgen run --probe``), which
    the engine's rule is held to (``loadgen/src/verdict/queueing.rs``): each threshold has a
    vector on it and one beside it, and every vector names one of the three answers."""
    rules = verdict_rules()
    vectors = rules["probe_vectors"]
    assert rules["probe_no_queue_ratio"] < rules["probe_queueing_ratio"]
    assert {v["queue"] for v in vectors} == {"waited", "no_wait", None}
    ratios = {v["probe_latency_ratio"] for v in vectors}
    for name in ("probe_queueing_ratio", "probe_no_queue_ratio"):
        threshold = rules[name]
        assert threshold in ratios, name
        assert any(abs(x - threshold) <= 0.02 and x != threshold for x in ratios), name
        assert name in rules["meanings"], name


def test_a_queued_level_holds_its_latency_numbers_to_the_contract(
    binaries: Binaries, tmp_path: Path
) -> None:
    """A real run that queues at the server (16 connections on 4 workers × 10 ms): run.json's
    verdict is ``server.queueing`` and its numbers are on the contract's side of each threshold
    (the engine decides; this reads the file it wrote). The probe at one connection that
    ``loadgen run`` sends after such a level agrees, which makes it strong — unless other work
    kept the host busy (``host_other_cores``), which leaves it weak."""
    out = tmp_path / "queued"
    server_args = ("--workers", "4", "--service-time", "10ms")
    record(binaries, server_args, out, 16, "2s")
    run_json = json.loads((out / "run.json").read_text())
    verdict, probe = run_json["verdict"], run_json.get("probe")
    numbers, rules = verdict["numbers"], verdict_rules()
    agrees = probe is not None and probe["latency_ratio"] >= rules["probe_queueing_ratio"]
    strength = "strong" if agrees and "host_other_cores" not in numbers else "weak"
    assert (verdict["rule"], verdict["strength"]) == ("server.queueing", strength), verdict
    if probe is not None:
        assert numbers["probe_latency_ratio"] == pytest.approx(probe["latency_ratio"]), probe
    assert numbers["latency_ratio"] >= rules["queueing_latency_ratio"], numbers
    assert numbers["served_at_once"] >= rules["min_served_at_once"], numbers
    ratio = numbers["median_latency_ns"] / numbers["fastest_latency_ns"]
    assert ratio == pytest.approx(numbers["latency_ratio"]), numbers


def test_the_host_vectors_straddle_the_contracts_threshold() -> None:
    """``contract/verdict.json``'s ``host_vectors`` (issue 44), which the engine's busy-host
    rule is held to (``loadgen/src/verdict/host.rs``): other work's share of the host's cores
    has a vector on the threshold's either side, with and without the server's scraped CPU."""
    rules = verdict_rules()
    threshold = rules["busy_host_other_share"]
    shares = []
    for v in rules["host_vectors"]:
        other = v["host_other_cores"] - (v["server_cpu_cores"] or 0.0)
        share = other / v["host_cores"]
        assert (share >= threshold - 1e-9) == v["busy"], v
        shares.append(share)
    assert any(0 <= s - threshold <= 0.01 for s in shares)
    assert any(0 < threshold - s <= 0.01 for s in shares)
    assert {v["server_cpu_cores"] is None for v in rules["host_vectors"]} == {True, False}
    assert "busy_host_other_share" in rules["meanings"]


def test_the_shared_host_vectors_straddle_the_contracts_thresholds() -> None:
    """``contract/verdict.json``'s ``shared_host_vectors`` (issue 59: the embedded demo said
    "server (strong)" on two cores it and the client kept busy), which the engine's rule is held
    to (``loadgen/src/verdict/host.rs``): the host's busy cores and the client's own, each with
    a vector on its threshold's either side."""
    rules = verdict_rules()
    busy_at, client_at = rules["cpu_saturated_share"], rules["shared_host_client_share"]
    busy_shares, client_shares = [], []
    for v in rules["shared_host_vectors"]:
        busy = v["host_busy_cores"] / v["host_cores"]
        client = v["client_cores"] / v["host_cores"]
        assert (busy >= busy_at - 1e-9 and client >= client_at - 1e-9) == v["shared"], v
        busy_shares.append(busy)
        client_shares.append(client)
    for shares, threshold in ((busy_shares, busy_at), (client_shares, client_at)):
        assert any(0 <= s - threshold <= 0.01 for s in shares), shares
        assert any(0 < threshold - s <= 0.01 for s in shares), shares
    assert "shared_host_client_share" in rules["meanings"]


def test_the_delayed_ack_vectors_straddle_the_contracts_band() -> None:
    """``contract/verdict.json``'s ``delayed_ack_vectors`` and ``nagle_vectors`` (issue 59),
    which the engine's ``server.nagle`` is held to (``loadgen/src/verdict/timers.rs``): a body
    one delayed ACK after its headers lies in [delayed_ack_min_ns, delayed_ack_max_ns) moved by
    the lowest round trip; each edge has a vector on it and one a millisecond beside it, with
    and without a round trip; and the share of such bodies has a vector on each threshold and
    beside it."""
    rules = verdict_rules()
    low, high = rules["delayed_ack_min_ns"], rules["delayed_ack_max_ns"]
    assert 30e6 <= low < 40e6 < high, (low, high)  # Linux's TCP_DELACK_MIN is 40 ms
    edges = set()
    for v in rules["delayed_ack_vectors"]:
        rtt_ns = (v["min_rtt_us"] or 0) * 1e3
        gap_ns = v["gap_ms"] * 1e6
        assert (low + rtt_ns <= gap_ns < high + rtt_ns) == v["in_band"], v
        edges |= {(gap_ns - rtt_ns - edge, v["min_rtt_us"] is None) for edge in (low, high)}
    for beside in (0.0, -1e6):
        assert {(beside, True), (beside, False)} <= edges, beside
    shares = {v["delayed_ack_share"]: v["gap"] for v in rules["nagle_vectors"]}
    assert set(shares.values()) == {"delayed_ack", "own_wait", None}
    for name, on, off in (
        ("nagle_min_share", "delayed_ack", None),
        ("own_wait_max_share", "own_wait", None),
    ):
        threshold = rules[name]
        assert shares[threshold] == on, name
        assert any(0 < abs(x - threshold) <= 0.02 and shares[x] == off for x in shares), name
        assert name in rules["meanings"], name
    assert rules["own_wait_max_share"] < rules["nagle_min_share"]


def test_the_syn_retry_vectors_straddle_the_contracts_schedule() -> None:
    """``contract/verdict.json``'s ``syn_retry_vectors`` and ``backlog_vectors`` (issue 59),
    which the engine's ``server.accept_backlog`` is held to (``loadgen/src/verdict/timers.rs``):
    a connect waited for a resent SYN when it took at least ``syn_retry_first_ns`` and ended
    less than ``syn_retry_slack_ns`` after a whole multiple of it; the resent SYNs' share of
    latency decides at ``syn_retry_min_latency_share``. Each edge has a vector on it and beside."""
    rules = verdict_rules()
    first, slack = rules["syn_retry_first_ns"], rules["syn_retry_slack_ns"]
    assert first == 1e9, first  # TCP_TIMEOUT_INIT (RFC 6298)
    seen = set()
    for v in rules["syn_retry_vectors"]:
        ns = v["connect_ms"] * 1e6
        assert (ns >= first and ns % first < slack) == v["resent_syn"], v
        seen.add(v["connect_ms"])
    edges_ms = (first / 1e6, first / 1e6 - 1, (first + slack) / 1e6, (first + slack) / 1e6 - 1)
    assert set(edges_ms) <= seen, seen
    threshold = rules["syn_retry_min_latency_share"]
    limits = {v["resent_syn_latency_share"]: v["limit"] for v in rules["backlog_vectors"]}
    assert limits[threshold] is True
    assert any(0 < threshold - x <= 0.02 and not limit for x, limit in limits.items())
    for name in ("syn_retry_first_ns", "syn_retry_slack_ns", "syn_retry_min_latency_share"):
        assert name in rules["meanings"], name


def test_a_shard_sets_cause_follows_the_contracts_cause_order() -> None:
    """``contract/verdict.json``'s ``cause_order`` (issue 57): the analysis gives a set of shards
    started by hand the first of its shards' causes in the order the engine's checks run — read
    from the contract, held by its ``cause_order_vectors`` (the engine's checks are held to the
    same order by ``loadgen/src/verdict/decide.rs``'s tests)."""
    rules = verdict_rules()
    assert tuple(rules["cause_order"]) == ORDER
    vectors = rules["cause_order_vectors"]
    for v in vectors:
        assert min(v["causes"], key=ORDER.index) == v["first"], v
    # Every neighbouring pair of the order has a vector, so a swap in the contract fails here.
    pairs = {tuple(sorted(v["causes"], key=ORDER.index)) for v in vectors}
    assert all((a, b) in pairs for a, b in itertools.pairwise(ORDER)), pairs


@pytest.mark.parametrize("index", range(6))
def test_a_sweeps_server_check_follows_the_contracts_sweep_vectors(index: int) -> None:
    """``contract/verdict.json``'s ``sweep`` thresholds (issue 57): a sweep of N is the server's
    when its throughput stops on a plateau (``plateau_share`` of the peak, spanning
    ``plateau_span``) while latency grows at least as N^``min_latency_slope``. Each vector sits
    beside one threshold, on one side or the other, and the check reads the contract's numbers."""
    rules = verdict_rules()
    v = rules["sweep_vectors"][index]
    sweep = pd.DataFrame(
        {k: v[k] for k in ("connections", "throughput_rps", "mean_latency_ms")}
    ).astype({"throughput_rps": float, "mean_latency_ms": float})
    evidence = Evidence(sweep=sweep, models=("closed",) * len(sweep))
    finding, _, _ = check_server(evidence, Thresholds())
    assert (finding.status == "limit") == v["server"], (v, finding)
    t = Thresholds()
    assert (t.plateau_share, t.plateau_span, t.min_latency_slope) == tuple(
        rules["sweep"][k] for k in ("plateau_share", "plateau_span", "min_latency_slope")
    )
    assert "sweep" in rules["meanings"] and "cause_order" in rules["meanings"]
