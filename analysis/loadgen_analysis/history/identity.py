"""What a history series is keyed by, computed when the store is read.

A series is the runs of one *test*: the scenario, the request (method, when not GET, and the
target's path and query), the model, protocol and loadgen version — not the host and port, so
a service started on an ephemeral port in CI every night stays one series. ``--by-host`` keys by
the whole URL (two deployments told apart); a run added with ``--series NAME`` is in the series
of that name whatever it tested. The key is derived here, at read time, from the columns every
history file holds, so a store written before this rule reads the same way (its files' stored
``fingerprint`` was the whole URL's; it is replaced, never trusted). This module names runs for
people too: :func:`run_name` is the run's ``--label name=``/commit, or its folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

#: What identifies a series: runs that differ in any of these are not compared.
FINGERPRINT_FIELDS = ("scenario", "target", "model", "protocol", "loadgen_version")


def digest(parts: Mapping[str, Any]) -> str:
    """12 hex digits of the SHA-256 of ``parts`` as sorted JSON."""
    return hashlib.sha256(json.dumps(dict(parts), sort_keys=True).encode()).hexdigest()[:12]


def request_text(url: str, method: str | None, by_host: bool) -> str:
    """``/albums/1``, ``POST /albums``; with ``by_host`` the whole URL instead of its path."""
    parts = urlsplit(url)
    if by_host or not parts.netloc:
        where = url
    else:
        where = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return f"{method} {where}" if method and method.upper() != "GET" else where


def keyed(history: pd.DataFrame, by_host: bool = False) -> pd.DataFrame:
    """``history`` with ``target`` the request tested (``url`` the URL as stored) and
    ``fingerprint`` the series it belongs to (module docs)."""
    out = history.copy()
    methods = out["method"] if "method" in out else pd.Series(None, index=out.index)
    names = out["series"] if "series" in out else pd.Series(None, index=out.index)
    out["url"] = out["target"]
    out["target"] = [
        request_text(str(url), m if isinstance(m, str) else None, by_host)
        for url, m in zip(out["url"], methods, strict=True)
    ]
    out["fingerprint"] = [
        name if isinstance(name, str) and name else digest({f: row[f] for f in FINGERPRINT_FIELDS})
        for name, row in zip(names, out.to_dict("records"), strict=True)
    ]
    return out


def series_title(row: Mapping[str, Any]) -> str:
    """What a reader calls a series: its ``--series`` name, or scenario, request and model."""
    name = row.get("series")
    if isinstance(name, str) and name:
        return name
    scenario = str(row.get("scenario") or "")
    target = str(row["target"])
    head = target if scenario in ("", "command line") else f"{scenario}, {target}"
    return f"{head} ({row['model']})"


def run_name(row: Mapping[str, Any]) -> str:
    """A run as people know it: its ``name`` label, else its folder (and commit when labelled),
    with its run id after."""
    labels = json.loads(row.get("labels") or "{}") if isinstance(row.get("labels"), str) else {}
    name = labels.get("name") or PurePosixPath(str(row.get("source") or "")).name
    commit = row.get("commit")
    extra = f", commit {commit}" if isinstance(commit, str) and commit else ""
    return f"{name} (run {row['run_id']}{extra})" if name else str(row["run_id"])
