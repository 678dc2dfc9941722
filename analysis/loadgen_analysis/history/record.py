"""One run as the rows of its history file (contract ``history_run``): one row per op.

Each row carries when the run started, its labels (commit, branch, build — from ``--label``
and from the CI variables of GitHub Actions, GitLab, Buildkite, CircleCI and Jenkins when
present), the fingerprint of what was tested (scenario, target, model, protocol, loadgen
version: a change of any starts a new series) and the op's figures: throughput, p50/p90/p99/
p99.9 in the one latency definition of the run kind (:func:`~..reductions.summary.op_summary`;
from the intended send time under the open model), error rate, and the run's verdict. A
``loadgen capacity`` directory is one row (op ``all``) with ``capacity_rps`` and its interval.
A sharded run's shard directories are one run, as everywhere in the package.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..io.capacity import is_capacity_dir, read_capacity
from ..io.load import load_run
from ..io.run import Run
from ..reductions.summary import op_summary
from ..verdict.attribution import attribute
from .identity import FINGERPRINT_FIELDS, digest

#: Label → the CI variables it is read from, first present wins; ``--label`` overrides.
CI_LABELS = {
    "commit": ("GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "CIRCLE_SHA1", "GIT_COMMIT"),
    "branch": (
        "GITHUB_REF_NAME",
        "CI_COMMIT_REF_NAME",
        "BUILDKITE_BRANCH",
        "CIRCLE_BRANCH",
        "GIT_BRANCH",
    ),
    "build": (
        "GITHUB_RUN_ID",
        "CI_PIPELINE_ID",
        "BUILDKITE_BUILD_NUMBER",
        "CIRCLE_BUILD_NUM",
        "BUILD_NUMBER",
    ),
}

#: The figures a history row holds per op, as in op_summary (the metrics of ``history show``).
METRICS = ("throughput_rps", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "error_rate")


def parse_label(text: str) -> tuple[str, str]:
    """``key=value`` → (key, value); ValueError naming the fix otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--label '{text}' is not key=value; write e.g. --label commit=abc123")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise ValueError(
            f"--label {text!r} holds a control character; write the label in printable text"
        )
    return key.strip(), value.strip()


def labels(given: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The CI variables' commit/branch/build (when set), then ``given`` on top."""
    found = {}
    for label, names in CI_LABELS.items():
        value = next((environ[n] for n in names if environ.get(n)), None)
        if value is not None:
            found[label] = value
    return {**found, **given}


def _model_text(model: Mapping[str, Any]) -> str:
    """``closed, duration=1s, workers=8``: the model's kind, then its settings sorted."""
    rest = ", ".join(f"{k}={model[k]}" for k in sorted(model) if k != "kind")
    kind = str(model.get("kind", "unknown"))
    return f"{kind}, {rest}" if rest else kind


def fingerprint_of(run: Run) -> dict[str, str]:
    """Scenario, target, model, protocol and loadgen version of ``run``, and their hash."""
    config = run.config
    definition = config.get("definition") if isinstance(config.get("definition"), dict) else {}
    parts = {
        "scenario": str(config.get("scenario") or "unknown"),
        "target": str(config.get("url") or definition.get("target") or "unknown"),
        "model": _model_text(run.model_config),
        "protocol": str(config.get("protocol") or "HTTP/1.1"),
        "loadgen_version": str(
            run.meta.get("loadgen_version") or run.parquet_meta.get("loadgen.version") or "unknown"
        ),
    }
    return {"fingerprint": digest(parts), **parts, "method": _method(definition)}


def _method(definition: Mapping[str, Any]) -> str | None:
    """The method of the run's one request; None when it has several (the scenario names them)."""
    requests = definition.get("requests")
    if not isinstance(requests, dict) or len(requests) != 1:
        return None
    (request,) = requests.values()
    method = request.get("method") if isinstance(request, dict) else None
    return str(method) if method else None


def _identity(
    run: Run, kind: str, given: dict[str, str], series: str | None = None
) -> dict[str, Any]:
    if run.anchor_unix_ns is None:
        raise ValueError(f"{run.location}: the run has no start time (loadgen.anchor_unix_ns)")
    return {
        "started_unix_ns": run.anchor_unix_ns,
        "added_unix_ns": time.time_ns(),
        "run_id": run.run_id,
        "source": run.location,
        "kind": kind,
        **{k: given.get(k) for k in CI_LABELS},
        "labels": json.dumps(given, sort_keys=True, ensure_ascii=False),
        **fingerprint_of(run),
        "series": series,
    }


#: How a run that ran to its end ended (run.json ``exit_reason``); and its exit codes: 0, or
#: 99 when it crossed a threshold (its figures are the point of keeping it).
ENDED_AS_PLANNED = ("completed", "duration_elapsed")
EXIT_CODES_KEPT = (0, 99)


def _cut_short(run: Run) -> str | None:
    """Why ``run`` did not run to its end — no run.json (killed, or a full disk), a signal, a
    writer that failed, ``--abort-on-fail`` — or None when it did."""
    if not run.meta:
        return "it has no run.json: the process was killed or could not write it"
    reason = run.meta.get("exit_reason")
    if reason not in ENDED_AS_PLANNED:
        return f"it ended {reason}"
    code = run.meta.get("exit_code")
    if code is not None and code not in EXIT_CODES_KEPT:
        return f"it exited {code}"
    return None


def run_rows(run: Run, given: dict[str, str], series: str | None = None) -> pd.DataFrame:
    """The rows of one run: its identity and, per op, its figures and the run's verdict. A run
    cut short (interrupted, aborted, failed) is refused: its figures describe part of a run,
    and the gate would judge them as a whole one."""
    cut_short = _cut_short(run)
    if cut_short:
        raise ValueError(
            f"{run.location}: the run did not run to its end ({cut_short}); history keeps runs "
            "that did, so the gate never judges part of one; leave it out, or run it again"
        )
    summary = op_summary(run)
    if summary.empty:
        raise ValueError(
            f"{run.location}: the run has no judged requests (every row is a warm-up's, or it "
            "has none), so it has no figures to add; add a run whose measured phase sent requests"
        )
    identity = _identity(run, "run", given, series)
    verdict = attribute([run]).verdict
    rows = []
    for row in summary.to_dict("records"):
        latency_from = row.get("latency_from")
        rows.append(
            {
                **identity,
                "op": row["op"],
                "requests": int(row["requests"]),
                **{metric: float(row[metric]) for metric in METRICS},
                "latency_from": latency_from if isinstance(latency_from, str) else "start",
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows)


def capacity_rows(path: Path, given: dict[str, str], series: str | None = None) -> pd.DataFrame:
    """One row for a ``loadgen capacity`` directory: its answer and interval, identified by its
    calibration run (the same target and scenario), with ``capacity`` as its model's kind."""
    capacity = read_capacity(path)
    calibration = load_run(_identity_run(path, capacity))
    identity = _identity(calibration, "capacity", given, series)
    slos = ", ".join(str(s) for s in capacity.get("slos") or [])
    identity["model"] = f"capacity, slos={slos}, arrivals={capacity.get('arrivals')}"
    identity["fingerprint"] = digest({k: identity[k] for k in FINGERPRINT_FIELDS})
    interval = capacity.get("interval") or [None, None]
    row = {
        **identity,
        "op": "all",
        "verdict": capacity.get("verdict"),
        # An unconverged search's answer is only a lower bound: kept as capacity_low_rps, not
        # as an answer the gate would judge (unconverged_note says so).
        "capacity_rps": capacity.get("capacity_rps") if capacity.get("converged") else None,
        "capacity_low_rps": interval[0],
        "capacity_high_rps": interval[1],
        "run_id": f"capacity-{calibration.run_id}",
        "source": str(path),
    }
    return pd.DataFrame([row])


def _identity_run(path: Path, capacity: Mapping[str, Any]) -> Path:
    """The run a capacity search is identified by (target, scenario, protocol, version): its
    calibration (DIR/calibration, or ``--calibration DIR``), or with ``--start-rate``, which
    has none, its first level."""
    given = (capacity.get("calibration") or {}).get("run_dir")
    levels = capacity.get("levels") or []
    run_dir = given or (levels[0].get("run_dir") if levels else None)
    if not run_dir:
        return path / "calibration"
    # Written relative to where the search ran; read from anywhere: inside DIR by its name.
    candidates = (path / Path(run_dir).name, Path(run_dir))
    return next((c for c in candidates if c.is_dir()), Path(run_dir))


def is_capacity(path: str | Path) -> bool:
    """Whether ``path`` (local) is a ``loadgen capacity`` directory."""
    return not str(path).startswith("s3://") and is_capacity_dir(path)


def unconverged_note(path: Path) -> str | None:
    """What ``history add`` says of a capacity search that did not converge, or None."""
    capacity = read_capacity(path)
    if capacity.get("converged"):
        return None
    low = (capacity.get("interval") or [None])[0]
    bound = f"its lower bound {low:g} req/s" if isinstance(low, int | float) else "its bracket"
    return (
        f"{path}: the capacity search did not converge (ended: {capacity.get('ended')}); "
        f"{bound} is stored as capacity_low_rps, with no capacity_rps, so the gate does not "
        "judge it"
    )


def split_capacity(paths: Sequence[str]) -> tuple[list[Path], list[str]]:
    """(capacity directories, other paths) of ``history add``'s RUNs: a capacity directory
    given, or one inside a folder given (a folder's runs are read as the analysis reads them,
    which leaves capacity directories out), is one row of its own."""
    capacities: list[Path] = []
    others: list[str] = []
    for raw in paths:
        if is_capacity(raw):
            capacities.append(Path(raw))
            continue
        folder = Path(raw)
        inside = (
            sorted(c for c in folder.iterdir() if c.is_dir() and is_capacity(c))
            if not str(raw).startswith("s3://")
            and folder.is_dir()
            and not (folder / "requests").exists()
            else []
        )
        capacities += inside
        if not inside or _has_runs_besides(folder, inside):
            others.append(raw)
    return capacities, others


def _has_runs_besides(folder: Path, capacities: list[Path]) -> bool:
    """Whether ``folder`` holds run directories (or folders of them) besides ``capacities``."""
    return any(
        child.is_dir()
        and child not in capacities
        and (
            (child / "requests").is_dir()
            or any((g / "requests").is_dir() for g in child.iterdir() if g.is_dir())
        )
        for child in folder.iterdir()
    )
