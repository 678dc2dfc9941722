"""The open model's schedule per run: what was offered against what was achieved.

loadgen knows how it kept its schedule and writes it (run.json ``summary.open``: scheduled,
dropped at ``--max-in-flight``, late beyond ``--max-lateness``); this module only reads those
counts, summed over a sharded run's parts, and adds the send lag — how long after its intended
time each request was really sent (``start_ns − intended_ns``) — from the rows. Runs of other
models have no row here.
"""

from __future__ import annotations

import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.run import Run
from .cache import cached_connection
from .quantiles import exact_quantiles
from .summary import run_table

#: The send-lag percentiles of the table.
LAG_QUANTILES = (0.5, 0.99)


def _open_counts(run: Run) -> dict[str, int] | None:
    """``summary.open`` summed over the run's parts; None for a run of another model."""
    parts = [(part.meta.get("summary") or {}).get("open") for part in run.parts]
    if not any(parts):
        return None
    counts = {"scheduled": 0, "dropped": 0, "late": 0}
    for part in parts:
        for key in counts:
            counts[key] += int((part or {}).get(key) or 0)
    return counts


def open_model_table(runs: RunsArg) -> pd.DataFrame:
    """One row per open-model run: run, scheduled, sent (rows), dropped, late and their shares
    of the scheduled sends, offered_rps (scheduled / wall time), achieved_rps (rows / wall
    time), ok_rps, and the send lag in ms (p50, p99, max). Empty when no run is open-model."""
    runs = as_runs(runs)
    counts = {i: c for i, run in enumerate(runs) if (c := _open_counts(run)) is not None}
    if not counts:
        return pd.DataFrame()
    table = run_table(runs).reset_index(drop=True)
    lags = _send_lags(runs, list(counts))
    rows = []
    for i, c in counts.items():
        row = table.iloc[i]
        scheduled = max(c["scheduled"], 1)
        wall_s = float(row["wall_s"]) or float("nan")
        lag = lags.get(i, (float("nan"),) * (len(LAG_QUANTILES) + 1))
        rows.append(
            {
                "run": runs[i].label,
                "scheduled": c["scheduled"],
                "sent": int(row["requests"]),
                "dropped": c["dropped"],
                "dropped_share": c["dropped"] / scheduled,
                "late": c["late"],
                "late_share": c["late"] / scheduled,
                "offered_rps": c["scheduled"] / wall_s,
                "achieved_rps": float(row["throughput_rps"]),
                "ok_rps": float(row["ok_throughput_rps"]),
                "lag_p50_ms": lag[0],
                "lag_p99_ms": lag[1],
                "lag_max_ms": lag[2],
            }
        )
    return pd.DataFrame(rows)


def _send_lags(runs: list[Run], indices: list[int]) -> dict[int, tuple[float, ...]]:
    """Per run index: the send lag's LAG_QUANTILES and maximum in ms, exactly."""
    con = cached_connection(runs)
    wanted = ", ".join(str(i) for i in indices)
    relation = (
        "(SELECT run_index, start_ns - intended_ns AS lag_ns FROM records "
        f"WHERE intended_ns IS NOT NULL AND run_index IN ({wanted}))"
    )
    quantiles = exact_quantiles(con, relation, ["run_index"], "lag_ns", LAG_QUANTILES)
    maxima = dict(
        con.execute(f"SELECT run_index, max(lag_ns) FROM {relation} GROUP BY 1").fetchall()
    )
    return {
        int(r.run_index): (*(v / 1e6 for v in r.q), maxima[r.run_index] / 1e6)
        for r in quantiles.itertuples(index=False)
    }


def steady_completions(runs: RunsArg) -> pd.DataFrame:
    """Per open-model run, its steady window — the second half of its schedule, from the
    middle of the intended send times to the last — the sends intended in it and the responses
    that completed in it (any outcome). Both counts shift by the same latency, so in a level that
    kept up they match whatever the latency; in one that fell behind, completions run at the
    system's capacity. Columns: run, window_s, sent, completed."""
    runs = as_runs(runs)
    con = cached_connection(runs)
    rows = con.execute(
        """
        WITH bounds AS (
            SELECT run_index, (min(intended_ns) + max(intended_ns)) / 2 AS mid_ns,
                max(intended_ns) AS end_ns
            FROM records WHERE intended_ns IS NOT NULL GROUP BY run_index)
        SELECT b.run_index, any_value(b.end_ns - b.mid_ns) / 1e9 AS window_s,
            count(*) FILTER (WHERE r.intended_ns >= b.mid_ns) AS sent,
            count(*) FILTER (
                WHERE r.start_ns + r.latency_ns >= b.mid_ns
                AND r.start_ns + r.latency_ns <= b.end_ns) AS completed
        FROM records r JOIN bounds b USING (run_index)
        GROUP BY b.run_index ORDER BY b.run_index
        """
    ).fetchall()
    return pd.DataFrame(
        [
            {"run": runs[int(i)].label, "window_s": float(w), "sent": int(s), "completed": int(c)}
            for i, w, s, c in rows
        ],
        columns=["run", "window_s", "sent", "completed"],
    )
