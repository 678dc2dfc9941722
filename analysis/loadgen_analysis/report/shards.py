"""``loadgen-analyze summary``'s text about shard sets: per sharded run, how many shards, their
start skew and each one's share of the requests, from :func:`shard_table`.
"""

from __future__ import annotations

from ..io.run import Run
from ..reductions.summary import shard_table


def shards_text(runs: list[Run]) -> str:
    """Per sharded run: how many shards, their start skew and each one's share of requests."""
    table = shard_table(runs)
    blocks = []
    for run in runs:
        if not run.shards:
            continue
        rows = table[table["run"] == run.label]
        head = f"{run.label}: {len(run.shards)} of {run.shard_count} shards"
        if run.missing_shards:
            missing = ", ".join(f"{i}/{run.shard_count}" for i in run.missing_shards)
            head += f" — INCOMPLETE, missing {missing}"
        first = rows["first_request_skew_ms"].iloc[0]
        skew = (
            f"start skew {first:.1f} ms (first requests)"
            if first == first  # NaN: fewer than two shards sent a request
            else "start skew unknown (fewer than two shards sent a request)"
        )
        offset = rows["start_offset_skew_ms"].iloc[0]
        if offset == offset:  # not NaN: the shards were started with --start-at
            skew += f", {offset:.1f} ms (start after --start-at)"
        shown = rows[["shard", "directory", "host", "workers", "requests", "share_pct"]].copy()
        shown["first request ms"] = rows["first_request_ms"]
        shown["late ms"] = rows["start_offset_ms"]
        shown = shown.rename(columns={"share_pct": "share %"})
        body = shown.to_string(index=False, float_format=lambda v: f"{v:.1f}")
        blocks.append(f"{head}; {skew}\n{body}")
    return "\n\n".join(blocks)
