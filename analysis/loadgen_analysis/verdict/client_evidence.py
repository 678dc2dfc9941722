"""The client's side of a run: its CPU (against its quota), CFS throttling, whether it shared
the cores with the server, and the bytes its network interface moved.

Responsible for reading ``client-metrics.parquet`` (reduced in DuckDB) and run.json's
``client`` object into one row of numbers per run, and nothing else: what they mean for the
verdict is :mod:`.attribution`'s business. Every value is optional: version-1
files have no throttling columns, a run without client metrics has no CPU, an older run.json no
``client`` object. A sharded run ran on several clients; its value is the busiest client's,
since one saturated client is enough to hold the load back.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import pandas as pd

from ..io.load import as_runs
from ..io.run import Run

# Column names of client-metrics.parquet, as contract/files.json spells them; READS lists them
# and a test holds it to the contract, so a renamed column fails there, not silently here.
CPU_UTILISATION = "cpu_utilisation"
THROTTLED_NS = "throttled_ns"
NR_PERIODS = "nr_periods"
NR_THROTTLED = "nr_throttled"
NETWORK = "network"
INTERVAL_NS = "interval_ns"
#: The client-metrics columns this module reads; the throttling ones from schema version 2.
READS = {
    1: (CPU_UTILISATION, NETWORK, INTERVAL_NS),
    2: (THROTTLED_NS, NR_PERIODS, NR_THROTTLED),
}
#: The run.json fields this module reads (under ``client``; contract/files.json's ``run_json``).
RUN_JSON_READS = (
    "client.cpu_quota_cores",
    "client.cpu_limit_cores",
    "client.throttled_ns",
    "client.throttled_share",
    "client.sampled_ns",
    "client.saturated",
    "client.saturation",
    "client.server_shares_cores",
    "client.target_interface",
    "client.link_capacity_bps",
    "client.link_capacity_source",
)
#: run.json ``client.saturation`` when the engine judged the client saturated by its CPU
#: quota (contract/files.json); the other value is ``cpu``. The engine owns the rule.
QUOTA_SATURATION = "cpu-quota"
#: Rows covering less than this share of a second are not a rate (the last row may be short).
MIN_INTERVAL_NS = 500_000_000


@dataclass
class ClientEvidence:
    """One run's client numbers; None where the run did not record them."""

    run: str
    #: 90th percentile of the 1 Hz CPU utilisation, against ``cpu_limit_cores``.
    cpu_p90: float | None = None
    cpu_limit_cores: float | None = None
    cpu_quota_cores: float | None = None
    #: Throttled CFS periods / periods over the run, and the throttled time.
    throttled_share: float | None = None
    throttled_s: float | None = None
    #: Throttled time / sampled wall time.
    throttled_wall_share: float | None = None
    periods: int | None = None
    server_shares_cores: bool = False
    #: The console's verdict (run.json ``client.saturation``: ``cpu`` or ``cpu-quota``), when
    #: it judged the client saturated.
    console_saturation: str | None = None
    target_interface: str | None = None
    link_capacity_bps: float | None = None
    link_capacity_source: str | None = None
    #: Busiest second of the target interface, per direction (bytes/s).
    interface_tx_bytes_per_s: float | None = None
    interface_rx_bytes_per_s: float | None = None


def _source(path: Path) -> str:
    return "read_parquet('" + str(path).replace("'", "''") + "')"


def _metrics(con: duckdb.DuckDBPyConnection, path: Path, interface: str | None) -> dict:
    source = _source(path)
    columns = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    out: dict[str, Any] = {}
    if CPU_UTILISATION in columns:
        (out["cpu_p90"],) = con.execute(
            f"SELECT quantile_cont({CPU_UTILISATION}, 0.9) FROM {source}"
        ).fetchone()
    if {THROTTLED_NS, NR_PERIODS, NR_THROTTLED} <= columns:
        out["throttled_ns"], out["periods"], out["throttled"], out["sampled_ns"] = con.execute(
            f"SELECT sum({THROTTLED_NS}), sum({NR_PERIODS}), sum({NR_THROTTLED}), "
            f"sum({INTERVAL_NS}) FILTER (WHERE {THROTTLED_NS} IS NOT NULL) FROM {source}"
        ).fetchone()
    if interface and NETWORK in columns:
        out["tx"], out["rx"] = con.execute(
            f"""SELECT max(n.tx_bytes * 1e9 / {INTERVAL_NS}), max(n.rx_bytes * 1e9 / {INTERVAL_NS})
            FROM (SELECT {INTERVAL_NS}, unnest({NETWORK}) AS n FROM {source}
                  WHERE {INTERVAL_NS} >= {MIN_INTERVAL_NS})
            WHERE n.interface = ?""",
            [interface],
        ).fetchone()
    return out


def is_loopback_interface(name: object) -> bool:
    """``lo`` (Linux) or ``lo0`` (BSD, macOS)."""
    return name in ("lo", "lo0")


def _loopback_target(config: dict[str, Any]) -> bool:
    host = urlsplit(str(config.get("url") or "")).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _max(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _part_evidence(con: duckdb.DuckDBPyConnection, part: Run) -> dict[str, Any]:
    client = part.meta.get("client")
    client = client if isinstance(client, dict) else {}
    interface = client.get("target_interface") or part.parquet_meta.get("loadgen.target_interface")
    metrics_file = part.path / "client-metrics.parquet"
    # On the loopback interface the counters hold both ends of every local flow, and other
    # processes' traffic too: the rows' own bytes are the measure there (the network check).
    counted = None if is_loopback_interface(interface) else interface
    metrics = _metrics(con, metrics_file, counted) if metrics_file.is_file() else {}
    periods = metrics.get("periods")
    share = metrics["throttled"] / periods if periods else _number(client.get("throttled_share"))
    throttled_ns = metrics.get("throttled_ns", client.get("throttled_ns"))
    sampled_ns = metrics.get("sampled_ns") or client.get("sampled_ns")
    wall_share = throttled_ns / sampled_ns if throttled_ns is not None and sampled_ns else None
    saturation = client.get("saturation") if client.get("saturated") else None
    shares = client.get("server_shares_cores")
    if shares is None:
        shares = bool(part.config.get("embedded_server")) or _loopback_target(part.config)
    return {
        "cpu_p90": _number(metrics.get("cpu_p90")),
        "cpu_limit_cores": _number(client.get("cpu_limit_cores")),
        "cpu_quota_cores": _number(client.get("cpu_quota_cores")),
        "throttled_share": _number(share),
        "throttled_s": _number(throttled_ns / 1e9) if throttled_ns is not None else None,
        "throttled_wall_share": _number(wall_share),
        "console_saturation": saturation,
        "periods": int(periods) if periods else None,
        "server_shares_cores": bool(shares),
        "target_interface": interface,
        "link_capacity_bps": _number(client.get("link_capacity_bps")),
        "link_capacity_source": client.get("link_capacity_source"),
        "interface_tx_bytes_per_s": _number(metrics.get("tx")),
        "interface_rx_bytes_per_s": _number(metrics.get("rx")),
    }


#: Values where a sharded run takes its busiest part's.
_BUSIEST = (
    "cpu_p90",
    "throttled_share",
    "throttled_s",
    "throttled_wall_share",
    "interface_tx_bytes_per_s",
    "interface_rx_bytes_per_s",
)


def client_evidence(runs: Run | str | list[Run | str]) -> list[ClientEvidence]:
    """One :class:`ClientEvidence` per run, in order; a sharded run's busiest part wins."""
    con = duckdb.connect(":memory:")
    out = []
    for run in as_runs(runs):
        parts = [_part_evidence(con, part) for part in run.parts]
        merged = dict(parts[0])
        for key in _BUSIEST:
            merged[key] = _max([p[key] for p in parts])
        merged["server_shares_cores"] = any(p["server_shares_cores"] for p in parts)
        out.append(ClientEvidence(run=run.label, **merged))
    return out


def evidence_frame(evidence: list[ClientEvidence]) -> pd.DataFrame:
    """The evidence as a table, one row per run (for notebooks and the report)."""
    return pd.DataFrame([vars(e) for e in evidence])
