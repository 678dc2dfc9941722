"""Large synthetic runs made from a small recorded one, for the scale benchmark and its test.

Not analysis: :func:`synthesise` tiles a recorded run directory's rows in time and across
workers until it has the rows asked for. Copy ``c`` of the seed's rows runs on workers
``worker + W·(c mod P)`` (W: the seed's worker count, P: ``parallel``) and starts
``(c div P)`` seed spans later, so every synthetic worker replays a real worker's sequence of
requests — real latencies, gaps, ops, phases, errors and bytes — and the run grows longer, not
denser, with its size. The segments keep the seed's schema and ``loadgen.*`` Parquet metadata
(so :mod:`loadgen_analysis.io.load` reads them as loadgen's own), one segment per
``rows_per_segment``; run.json is the seed's with the worker count raised and the printed
summary dropped (it described the seed). Rows are written as loadgen writes them: each
worker's requests in the order it sent them.

Usage: ``python -m loadgen_analysis.testing.synthetic SEED_RUN OUT_DIR ROWS [PARALLEL]``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import duckdb

from ..io.engine import engine_settings, parquet_files_sql
from ..io.load import load_run
from ..io.parquet import footer
from ..io.parquet import sql_string as _sql_string


def synthesise(
    seed: str | Path,
    out: str | Path,
    rows: int,
    parallel: int = 64,
    rows_per_segment: int = 10_000_000,
) -> Path:
    """Write a run directory ``out`` with ``rows`` rows tiled from the run at ``seed``."""
    run = load_run(seed)
    out = Path(out)
    (out / "requests").mkdir(parents=True, exist_ok=False)
    con = duckdb.connect(":memory:", config=engine_settings())
    con.execute("SET enable_progress_bar = false")
    files = parquet_files_sql(run.segments)
    con.execute(f"CREATE TABLE seed AS SELECT * FROM read_parquet({files}) ORDER BY start_ns")
    seed_rows, workers, span_ns = con.execute(
        "SELECT count(*), max(worker) + 1, max(start_ns + latency_ns) FROM seed"
    ).fetchone()
    columns = {r[0] for r in con.execute("DESCRIBE seed").fetchall()}
    sent = "s.send_ns" if "send_ns" in columns else "NULL"
    metadata = footer(run.segments[0]).metadata
    kv = ", ".join(
        f"{_sql_string(k)}: {_sql_string(v)}"
        for k, v in metadata.items()
        if k.startswith("loadgen.")
    )
    copies = math.ceil(rows / seed_rows)
    copies_per_segment = max(1, rows_per_segment // seed_rows)
    written = 0
    for part, first in enumerate(range(0, copies, copies_per_segment)):
        last = min(copies, first + copies_per_segment)
        take = min(rows - written, (last - first) * seed_rows)
        shift = f"(c // {parallel}) * {span_ns}"
        # Up to a tenth of the server wait (send to first byte) off each copy's row, so values
        # are as distinct as a real run's (and compress as badly); the order of a row's
        # times is kept, and its worker's next request still starts after it ends.
        jitter = (
            "coalesce(CAST(hash(c, s.start_ns) % greatest(1, (s.ttfb_ns - "
            f"coalesce({sent}, s.connect_ns, 0)) // 10) AS BIGINT), 0)"
        )
        con.execute(
            f"""
            COPY (
                SELECT s.* REPLACE (
                    s.start_ns + {shift} AS start_ns,
                    s.intended_ns + {shift} AS intended_ns,
                    s.latency_ns - {jitter} AS latency_ns,
                    s.ttfb_ns - {jitter} AS ttfb_ns,
                    CAST(s.worker + {workers} * (c % {parallel}) AS UINTEGER) AS worker)
                FROM range({first}, {last}) t(c), seed s
                ORDER BY c, s.start_ns
                LIMIT {take}
            ) TO {_sql_string(str(out / "requests" / f"part-{part:05d}.parquet"))}
            (FORMAT parquet, COMPRESSION zstd, KV_METADATA {{{kv}}})
            """
        )
        written += take
    _write_run_json(run.path / "run.json", out / "run.json", workers * min(parallel, copies))
    return out


def _write_run_json(seed_json: Path, out_json: Path, workers: int) -> None:
    meta = json.loads(seed_json.read_text()) if seed_json.is_file() else {}
    meta.pop("summary", None)
    config = meta.get("config")
    if isinstance(config, dict):
        if isinstance(config.get("connections"), int):
            config["connections"] = workers
        model = (config.get("definition") or {}).get("model") or {}
        if isinstance(model, dict) and isinstance(model.get("workers"), int):
            model["workers"] = workers
    out_json.write_text(json.dumps(meta, indent=2))


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(
            "usage: python -m loadgen_analysis.testing.synthetic SEED_RUN OUT_DIR ROWS [PARALLEL]"
        )
    args = sys.argv[1:]
    synthesise(args[0], args[1], int(args[2]), *(int(a) for a in args[3:]))
