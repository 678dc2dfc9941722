"""Issue 27: the shards table of a run where fewer than two shards sent a request printed
"start skew nan ms"; it says the skew is unknown and why."""

from __future__ import annotations

import shutil
from pathlib import Path

from .conftest import ShardSet, run_cli


def test_regression_one_shard_present_prints_no_nan_skew(
    shard_sets: dict[str, ShardSet], tmp_path: Path
) -> None:
    closed = shard_sets["closed"]
    alone = tmp_path / "alone"
    shutil.copytree(closed.shards[0], alone / closed.shards[0].name)
    proc = run_cli("summary", alone)
    assert proc.returncode == 0, proc.stderr
    assert "1 of 3 shards" in proc.stdout, proc.stdout
    assert "nan" not in proc.stdout.lower(), proc.stdout
    assert "start skew unknown (fewer than two shards sent a request)" in proc.stdout
