"""Joining the shard directories of one sharded run into one :class:`~.run.Run`.

Sharded runs (``loadgen run --shard I/N``) write one directory per shard. Shard directories
belong to one run when they have the same N and the same ``start_at_unix_ns`` (``--start-at``)
or, without one, the same configuration. An incomplete set is analysed with an
:class:`IncompleteShardSetWarning`; a set with an index twice or with different N is a
:class:`~loadgen_analysis.errors.RunLoadError`. Loading the directories is :mod:`.load`.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import RunLoadError
from .run import Run


class IncompleteShardSetWarning(UserWarning):
    """A sharded run is analysed from fewer than all N of its shard directories."""


_SHARD_SUFFIX = re.compile(r"-shard-\d+-of-\d+$")


def _set_key(run: Run) -> tuple[str, str]:
    """What the shard directories of one run share: the ``--start-at`` instant, or else the
    configuration (minus its description, which states the shard's own slice)."""
    # run.json's, or the segments' own copy when a lost process left no run.json.
    start_at = run.meta.get("start_at_unix_ns", run.parquet_meta.get("loadgen.start_at_unix_ns"))
    if start_at is not None:
        return ("start_at", str(int(start_at)))
    config = {k: v for k, v in run.config.items() if k != "description"}
    if config.get("embedded_server"):
        # Each shard started its own embedded server, on its own port.
        config.pop("url", None)
        definition = config.get("definition")
        if isinstance(definition, dict):
            config["definition"] = {k: v for k, v in definition.items() if k != "target"}
    return ("config", json.dumps(config, sort_keys=True, default=str))


def _merge_set(members: list[Run], folder: Path | None) -> Run:
    """One run out of shard directories checked to belong together (same N, distinct I)."""
    members = sorted(members, key=lambda r: r.shard or (0, 0))
    count = members[0].shard_count
    by_anchor = sorted(members, key=lambda r: r.anchor_unix_ns or 0)
    anchors = [r.anchor_unix_ns for r in members if r.anchor_unix_ns is not None]
    anchor = min(anchors) if anchors else None
    base = _SHARD_SUFFIX.sub("", members[0].run_id)
    reasons = [str(r.meta.get("exit_reason", "no run.json")) for r in members]
    exit_reason = reasons[0]
    if len(set(reasons)) > 1:
        exit_reason = "mixed: " + ", ".join(
            f"{r.shard[0] if r.shard else '?'}: {reason}"
            for r, reason in zip(members, reasons, strict=True)
        )
    with_json = [r for r in members if r.meta] or members
    meta: dict[str, Any] = {
        key: with_json[0].meta[key]
        for key in ("schema_version", "kind", "loadgen_version", "start_at_unix_ns")
        if key in with_json[0].meta
    }
    meta |= {
        "run_id": f"{base}-shards-of-{count}",
        "anchor_unix_ns": anchor,
        "config": with_json[0].config,
        "created_at": by_anchor[0].meta.get("created_at"),
        "exit_reason": exit_reason,
        "shard_count": count,
        "shards": [r.meta.get("shard", r.parquet_meta.get("loadgen.shard")) for r in members],
    }
    parquet_meta = {k: v for k, v in members[0].parquet_meta.items() if k != "loadgen.shard"}
    parquet_meta["loadgen.run_id"] = meta["run_id"]
    if anchor is not None:
        parquet_meta["loadgen.anchor_unix_ns"] = str(anchor)
    name: str | None = None
    url: str | None = None
    if folder is None:
        # Shards given one by one: the run lives in the folder that holds them, and is named
        # after its run id.
        folder = Path(os.path.commonpath([r.path.parent for r in members]))
        name = meta["run_id"]
        urls = [r.url for r in members]
        if all(urls):
            parents = [posixpath.dirname(u.removeprefix("s3://")) for u in urls if u]
            url = "s3://" + posixpath.commonpath(parents)
            name = f"{url}/{name}"
    merged = Run(
        path=folder,
        segments=tuple(s for r in members for s in r.segments),
        rows=sum(r.rows for r in members),
        meta=meta,
        parquet_meta=parquet_meta,
        shards=tuple(members),
        url=url,
        name=name,
    )
    if merged.missing_shards:
        missing = ", ".join(f"{i}/{count}" for i in merged.missing_shards)
        warnings.warn(
            f"{merged.label}: incomplete sharded run: {len(members)} of {count} shards "
            f"(missing {missing}); analysing the shards present, so totals, throughput and "
            "workers cover only their part of the load",
            IncompleteShardSetWarning,
            stacklevel=4,
        )
    return merged


def _merge_shards(runs: Sequence[Run], folder: Path | None = None) -> list[Run]:
    """Replace the shard directories among ``runs`` by one merged run per sharded run.

    Unsharded and already merged runs pass through; a merged run takes the place of its first
    shard. ``folder``: the runs are a folder's content, so a folder holding one shard set and
    nothing else is that run (labelled by the folder's name).
    """
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        if run.shard is not None:
            groups.setdefault(_set_key(run), []).append(run)
    if not groups:
        return list(runs)
    whole_folder = folder is not None and len(groups) == 1 and all(r.shard for r in runs)
    merged: dict[tuple[str, str], Run] = {}
    for key, members in groups.items():
        counts = {r.shard[1] for r in members if r.shard}
        if len(counts) > 1:
            listing = ", ".join(
                f"{r.location} is {r.shard[0]}/{r.shard[1]}" for r in members if r.shard
            )
            raise RunLoadError(
                f"shard directories of one run disagree on the number of shards N ({listing}); "
                "every shard of a run must come from `--shard I/N` with the same N — pass each "
                "run's shard directories on their own"
            )
        seen: dict[int, Run] = {}
        for r in members:
            assert r.shard is not None
            other = seen.get(r.shard[0])
            if other is not None:
                raise RunLoadError(
                    f"{other.location} and {r.location} are both shard {r.shard[0]}/{r.shard[1]} "
                    "of the same run; keep one of them (a rerun shard?), or put each run's shard "
                    "directories in their own folder (runs started with different --start-at "
                    "times are told apart automatically)"
                )
            seen[r.shard[0]] = r
        merged[key] = _merge_set(members, folder if whole_folder else None)
    out: list[Run] = []
    for run in runs:
        if run.shard is None:
            out.append(run)
            continue
        key = _set_key(run)
        if key in merged:
            out.append(merged.pop(key))
    return out
