"""The sample runs under data/runs are in the engine's current schemas (issue 39): a sample
recorded before a schema change reads back with caveats ("not measured: recorded before
loadgen wrote …"), so a newcomer's first verdict would be one. The engine's current versions
are the contract's (contract/files.json, which loadgen/tests/contract.rs holds to the Rust
constants): the requests segments' and client/server metrics' ``loadgen.schema_version``,
and run.json's ``schema_version`` (the requests schema the run was written with). When this
fails, re-record the samples it lists with ``data/record-samples.sh``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from loadgen_analysis.io import contract

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"

#: The Parquet files of a run directory whose metadata names their schema version.
PARQUET_FILES = ("requests", "client_metrics", "server_metrics")


def _version(path: Path) -> str | None:
    metadata = pq.read_metadata(path).metadata or {}
    value = metadata.get(b"loadgen.schema_version")
    return value.decode() if value is not None else None


def _stale(run_dir: Path) -> list[str]:
    """What in ``run_dir`` is older than the engine writes, as ``file: vN, engine vM``."""
    current = {name: str(contract.file(name)["schema_version"]) for name in PARQUET_FILES}
    found = []
    written = json.loads((run_dir / "run.json").read_text()).get("schema_version")
    if str(written) != current["requests"]:
        found.append(f"run.json schema_version {written}, engine {current['requests']}")
    for name in PARQUET_FILES:
        for path in sorted(run_dir.glob(contract.file(name)["path"])):
            version = _version(path)
            if version != current[name]:
                where = path.relative_to(run_dir)
                found.append(f"{where} v{version}, engine v{current[name]}")
                break  # one segment says it for the rest
    return found


def test_the_samples_are_in_the_engines_current_schemas() -> None:
    run_dirs = sorted(p.parent for p in DATA.rglob("run.json"))
    assert len(run_dirs) >= 10, "the samples are missing"
    stale = {d.relative_to(DATA.parent.parent): _stale(d) for d in run_dirs}
    stale = {d: found for d, found in stale.items() if found}
    listing = "\n".join(f"  {d}: {'; '.join(found)}" for d, found in stale.items())
    samples = sorted({d.parts[2] for d in stale})
    # record-samples.sh records courses/ and capacity-w8-10ms/ alone, the rest all together.
    part = {"courses": "courses", "capacity-w8-10ms": "capacity"}
    commands = sorted({f"data/record-samples.sh {part[s]}" for s in samples if s in part})
    if set(samples) - set(part):  # the whole script records every sample
        commands = ["data/record-samples.sh"]
    assert not stale, (
        f"{len(stale)} sample run directories ({', '.join(samples)}) are older than the "
        f"engine; re-record them: {' and '.join(commands)}\n{listing}"
    )


def test_a_stale_sample_is_told_apart(tmp_path: Path) -> None:
    """The check can fail: a run.json of an older schema is found and named."""
    sample = next(p.parent for p in DATA.rglob("run.json"))
    run_json = json.loads((sample / "run.json").read_text())
    run_json["schema_version"] = 0
    (tmp_path / "run.json").write_text(json.dumps(run_json))
    assert _stale(tmp_path) == [
        f"run.json schema_version 0, engine {contract.file('requests')['schema_version']}"
    ]
