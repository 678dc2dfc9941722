"""The :class:`Run` value: one run directory (or a sharded run's merged directories), its
segments, run.json and ``loadgen.*`` Parquet metadata, and what can be read off them
(the workers it started, model, anchor, shard I/N).

Responsible for describing a run that is already loaded; loading and checking it is
:mod:`.load`, joining shard directories :mod:`.shards`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..units import count


def _parse_shard(text: object) -> tuple[int, int] | None:
    """``"I/N"`` → (I, N); None when absent, malformed or N = 1 (not sharded)."""
    if not isinstance(text, str):
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        return None
    index, count = int(match.group(1)), int(match.group(2))
    return (index, count) if count > 1 and index < count else None


@dataclass(frozen=True)
class Run:
    """One run: a run directory's segments, run.json and ``loadgen.*`` Parquet metadata — or,
    for a sharded run, the union of its shard directories (``shards``, ordered by index).

    A merged run's ``meta`` is made from its shards': the shared configuration, the earliest
    anchor and start, the exit reasons; it has no ``summary`` (each shard printed only its own).
    ``url`` is where the run was read from when that was not a local path (``s3://…``).
    """

    path: Path
    segments: tuple[Path, ...]
    rows: int
    meta: dict[str, Any] = field(repr=False)
    parquet_meta: dict[str, str] = field(repr=False)
    shards: tuple[Run, ...] = field(default=(), repr=False)
    url: str | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        """A short name for tables and legends: the run directory's name (the folder of a
        sharded run's directories), its ``s3://`` URL when read from S3, or for shards given
        one by one ``<run-id>-shards-of-N``."""
        return self.name or self.url or self.path.name

    @property
    def location(self) -> str:
        """Where the run was read from: its ``s3://`` URL or its local path (for shards given
        one by one, theirs)."""
        if self.shards and self.name:
            return ", ".join(s.location for s in self.shards)
        return self.url or str(self.path)

    @property
    def shard(self) -> tuple[int, int] | None:
        """(I, N) of a single shard directory (``--shard I/N``); None for an unsharded run and
        for a merged one."""
        if self.shards:
            return None
        return _parse_shard(self.meta.get("shard", self.parquet_meta.get("loadgen.shard")))

    @property
    def shard_count(self) -> int | None:
        """N of a sharded run (merged or one shard directory); None when not sharded."""
        if self.shards:
            return self.shards[0].shard_count
        return self.shard[1] if self.shard else None

    @property
    def missing_shards(self) -> tuple[int, ...]:
        """Indices of a merged run's shards that were not given (empty when complete)."""
        if not self.shards or self.shard_count is None:
            return ()
        present = {s.shard[0] for s in self.shards if s.shard}
        return tuple(i for i in range(self.shard_count) if i not in present)

    @property
    def is_complete(self) -> bool:
        """False for a sharded run analysed from fewer than all of its N shards."""
        if self.shards:
            return not self.missing_shards
        return self.shard is None

    @property
    def parts(self) -> tuple[Run, ...]:
        """The directories whose rows make up this run: its shards, or itself."""
        return self.shards or (self,)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.parquet_meta.get("loadgen.run_id", self.label))

    @property
    def schema_version(self) -> int:
        return int(self.parquet_meta["loadgen.schema_version"])

    @property
    def config(self) -> dict[str, Any]:
        """The resolved configuration (run.json ``config``, else the Parquet scenario TOML)."""
        config = self.meta.get("config")
        if isinstance(config, dict):
            return config
        scenario = self.parquet_meta.get("loadgen.scenario")
        if scenario:
            try:
                return tomllib.loads(scenario)
            except tomllib.TOMLDecodeError:
                return {}
        return {}

    @property
    def model_config(self) -> dict[str, Any]:
        """The resolved ``model`` table of the scenario (``kind``, ``workers``, …)."""
        definition = self.config.get("definition")
        model = definition.get("model") if isinstance(definition, dict) else None
        if model is None:
            model = self.config.get("model")
        return model if isinstance(model, dict) else {}

    @property
    def connections(self) -> int | None:
        """The workers this run started, N, as the engine counted them: run.json
        ``summary.workers.started`` (request schema ≥ 4), else for older runs the workers that
        sent in each phase (``summary.phases[].workers``) summed. A shard directory counts its
        own workers, a merged run sums its shards'. None without run.json: the count is never
        derived from the model's configuration.
        """
        if self.shards:
            counts = [s.connections for s in self.shards]
            return None if any(c is None for c in counts) else sum(c for c in counts if c)
        summary = self.summary or {}
        workers = summary.get("workers")
        if isinstance(workers, dict) and isinstance(workers.get("started"), int):
            return workers["started"]
        phases = summary.get("phases")
        if isinstance(phases, list) and phases:
            counts = [p.get("workers") for p in phases if isinstance(p, dict)]
            if counts and all(isinstance(c, int) for c in counts):
                return sum(counts)
        return None

    @property
    def model(self) -> str | None:
        kind = self.model_config.get("kind")
        if kind is None and isinstance(self.config.get("model"), str):
            kind = self.config["model"]
        return str(kind) if kind is not None else None

    @property
    def anchor_unix_ns(self) -> int | None:
        value = self.meta.get("anchor_unix_ns", self.parquet_meta.get("loadgen.anchor_unix_ns"))
        return int(value) if value is not None else None

    @property
    def summary(self) -> dict[str, Any] | None:
        """The summary loadgen printed (run.json), or None for a run without run.json."""
        summary = self.meta.get("summary")
        return summary if isinstance(summary, dict) else None

    @property
    def wall_time_s(self) -> float:
        """How long the run ran, from run.json's summary (a shard set: its longest shard's);
        0 when no summary says."""
        times = [(part.summary or {}).get("wall_time_ns") or 0 for part in self.parts]
        return max(times, default=0) / 1e9

    @property
    def client_metrics_files(self) -> tuple[Path, ...]:
        """The 1 Hz client samples (``client-metrics.parquet``) of each directory of the run."""
        files = (p.path / "client-metrics.parquet" for p in self.parts)
        return tuple(f for f in files if f.is_file())

    @property
    def has_client_metrics(self) -> bool:
        return bool(self.client_metrics_files)

    @property
    def server_metrics_files(self) -> tuple[Path, ...]:
        """The server's samples (``server-metrics.parquet``, ``--server-metrics``) of each
        directory of the run; empty when none was scraped."""
        files = (p.path / "server-metrics.parquet" for p in self.parts)
        return tuple(f for f in files if f.is_file())

    def describe(self) -> str:
        """One line naming the run for reports: label, model, workers, target and shards."""
        parts = [self.label]
        if self.model:
            parts.append(f"{self.model} model")
        if self.connections is not None:
            parts.append(count(self.connections, "worker"))
        url = self.config.get("url")
        if url:
            parts.append(str(url))
        if self.shards:
            parts.append(f"{len(self.shards)} of {self.shard_count} shards")
        elif self.shard:
            parts.append(f"shard {self.shard[0]}/{self.shard[1]}")
        return ", ".join(parts)
