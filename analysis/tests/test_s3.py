"""``s3://`` inputs against a real S3-compatible server (moto on 127.0.0.1): a run set uploaded
to a bucket analyses exactly as from local disk, labelled with its URLs, and S3 failures are one
clear sentence (exit 2 from the CLI)."""

from __future__ import annotations

import json
import socket

import pandas as pd
import pytest

import loadgen_analysis as la
from loadgen_analysis.io import s3

from .conftest import SHARDS, S3Bucket, ShardSet, run_cli


def _without_run(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=["run"]).reset_index(drop=True)


def test_a_sharded_run_on_s3_analyses_like_local(
    shard_sets: dict[str, ShardSet], s3_bucket: S3Bucket
) -> None:
    closed = shard_sets["closed"]
    url = s3_bucket.upload(closed.folder, "runs/closed")
    assert len(s3_bucket.keys("runs/closed/")) >= 3 * SHARDS  # run.json, segment, metrics

    (run,) = la.load_runs([url + "/"])
    assert run.label == url and run.location == url
    assert [s.label for s in run.shards] == [f"{url}/{p.name}" for p in closed.shards]
    assert run.is_complete and run.rows == 600

    local = la.op_summary(closed.folder)
    remote = la.op_summary(url)
    assert remote["run"].tolist() == [url]
    pd.testing.assert_frame_equal(_without_run(remote), _without_run(local))
    pd.testing.assert_frame_equal(
        _without_run(la.timeline(url)), _without_run(la.timeline(closed.folder))
    )
    shards = la.shard_table(url)
    assert shards["requests"].tolist() == la.shard_table(closed.folder)["requests"].tolist()
    assert shards["directory"].str.startswith(url + "/").all()


def test_cli_summary_from_s3_prints_the_same_numbers(
    shard_sets: dict[str, ShardSet], s3_bucket: S3Bucket
) -> None:
    closed = shard_sets["closed"]
    url = s3_bucket.upload(closed.folder, "cli/closed")
    proc = run_cli("summary", "--json", url)
    assert proc.returncode == 0, proc.stderr
    # The same rows the CLI prints for the local folder (to_json is what it prints).
    local_rows = json.loads(la.op_summary(closed.folder).to_json(orient="records"))
    remote_rows = json.loads(proc.stdout)
    assert [r.pop("run") for r in remote_rows] == [url]
    for row in local_rows:
        row.pop("run")
    assert remote_rows == local_rows
    assert "3 of 3 shards" in proc.stderr  # the shard table, beside the JSON


def test_one_run_directory_from_s3(shard_sets: dict[str, ShardSet], s3_bucket: S3Bucket) -> None:
    path = shard_sets["closed"].unsharded
    url = s3_bucket.upload(path, "single/run-1")
    run = la.load_run(url)
    assert run.label == url and not run.shards
    assert run.rows == la.load_run(path).rows
    assert run.connections == 6


def test_the_cache_is_reused_and_follows_deletions(
    shard_sets: dict[str, ShardSet], s3_bucket: S3Bucket
) -> None:
    closed = shard_sets["closed"]
    url = s3_bucket.upload(closed.folder, "cache/closed")
    root = s3.mirror(url)
    segment = next(root.rglob("part-*.parquet"))
    before = segment.stat()
    assert s3.mirror(url) == root
    after = segment.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    # A shard deleted from the bucket disappears from the cache too.
    last = closed.shards[-1].name
    for key in s3_bucket.keys(f"cache/closed/{last}/"):
        s3_bucket.client.delete_object(Bucket=s3_bucket.name, Key=key)
    with pytest.warns(la.IncompleteShardSetWarning, match=f"missing {SHARDS - 1}/{SHARDS}"):
        (run,) = la.load_runs([url])
    assert len(run.shards) == SHARDS - 1
    assert not list((root / last).rglob("*.parquet"))


def test_missing_bucket_is_a_clear_error(s3_bucket: S3Bucket) -> None:
    url = f"s3://{s3_bucket.name}-missing/runs"
    with pytest.raises(la.RunLoadError, match=r"bucket '.*-missing' does not exist"):
        la.load_runs([url])
    proc = run_cli("summary", url)
    assert proc.returncode == 2
    assert url in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_empty_prefix_is_a_clear_error(s3_bucket: S3Bucket) -> None:
    with pytest.raises(la.RunLoadError, match="no loadgen run under this prefix"):
        la.load_run(s3_bucket.url("nothing/here"))


def test_unreachable_endpoint_is_a_clear_error(
    s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(la.RunLoadError, match=rf"cannot reach http://127.0.0.1:{port}"):
        la.load_run(s3_bucket.url("runs"))


def test_an_s3_url_without_a_bucket_is_refused() -> None:
    with pytest.raises(la.RunLoadError, match="no bucket name"):
        la.load_run("s3:///runs")
