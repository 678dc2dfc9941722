"""``loadgen run --out s3://…`` against a real S3-compatible server (moto) on 127.0.0.1: the
binary uploads the run as it goes, and the analysis reads it back from ``s3://``.

What a user relies on: a sharded run written to S3 analyses exactly like the same files on
local disk; segments reach the bucket while the run is still going, so a machine lost mid-run
leaves every closed segment readable; a store that goes away mid-run costs nothing — the run
finishes, keeps everything locally, says where, and exits 1.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

import loadgen_analysis as la
from loadgen_analysis.testing import harness

from .conftest import S3_TEST_ENV, Binaries, S3Bucket

SHARDS = 3


def _download(bucket: S3Bucket, prefix: str, into: Path) -> Path:
    """Copy every object under ``prefix`` to ``into`` with boto3 (not the analysis's code)."""
    for key in bucket.keys(prefix):
        target = into / key[len(prefix) :].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        bucket.client.download_file(bucket.name, key, str(target))
    return into


def _run_json(bucket: S3Bucket, key: str) -> dict:
    return json.loads(bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read())


def _start_segmenting_run(
    binaries: Binaries, server_url: str, duration: str, out: str
) -> subprocess.Popen[bytes]:
    """``loadgen run`` for ``duration`` with a segment every 500 ms, uploading to ``out``."""
    command = [
        str(binaries.loadgen),
        "run",
        "--url",
        server_url + "/",
        "-c",
        "2",
        "-d",
        duration,
        "--segment-interval",
        "500ms",
        "--no-progress",
        "--out",
        out,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_sharded_run_in_s3_analyses_like_the_same_run_on_disk(
    binaries: Binaries, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    with harness.Server(("--service-time", "1ms"), binary=binaries.server) as server:
        start = harness.start_at_ms(2.0)
        summaries = harness.run_together(
            server.url + "/",
            [
                (s3_bucket.url("exp-1"), ("-c", "6", "-n", "900", "--shard", f"{i}/{SHARDS}"))
                for i in range(SHARDS)
            ],
            start_at=start,
            binary=binaries.loadgen,
        )
    # Each shard made its own run directory under the one prefix, and said where.
    run_dirs = sorted(s["run_dir"] for s in summaries)
    assert len(set(run_dirs)) == SHARDS
    assert all(d.startswith(s3_bucket.url("exp-1") + "/") for d in run_dirs)
    suffixes = {d.rstrip("/").rsplit("-shard-", 1)[-1] for d in run_dirs}
    assert suffixes == {f"{i}-of-{SHARDS}" for i in range(SHARDS)}
    keys = s3_bucket.keys("exp-1/")
    assert sum(k.endswith("/run.json") for k in keys) == SHARDS
    assert sum(k.endswith("/client-metrics.parquet") for k in keys) == SHARDS
    assert all(
        _run_json(s3_bucket, k)["exit_reason"] == "completed"
        for k in keys
        if k.endswith("/run.json")
    )

    from_s3 = la.op_summary(s3_bucket.url("exp-1"))
    local = _download(s3_bucket, "exp-1", tmp_path / "exp-1")
    from_disk = la.op_summary(local)
    pd.testing.assert_frame_equal(
        from_s3.drop(columns=["run"], errors="ignore"),
        from_disk.drop(columns=["run"], errors="ignore"),
    )
    # …and both are what the three processes printed.
    assert int(from_s3["requests"].sum()) == 900
    assert int(from_s3["requests"].sum()) == sum(s["summary"]["requests"] for s in summaries)
    assert int(from_s3["failed"].sum()) == 0


def test_segments_reach_s3_while_the_run_goes_on_and_a_lost_process_keeps_them(
    binaries: Binaries, s3_bucket: S3Bucket
) -> None:
    with harness.Server(binary=binaries.server) as server:
        proc = _start_segmenting_run(binaries, server.url, "30s", s3_bucket.url("lost"))
        try:
            # Bounded wait for the third closed segment, then the machine "disappears".
            deadline = time.monotonic() + 20
            segments: list[str] = []
            while time.monotonic() < deadline and len(segments) < 3:
                time.sleep(0.2)
                segments = [k for k in s3_bucket.keys("lost/") if k.endswith(".parquet")]
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=10)
    assert len(segments) >= 3, f"segments in S3 while running: {segments}"
    keys = s3_bucket.keys("lost/")
    (run_json_key,) = [k for k in keys if k.endswith("/run.json")]
    started = _run_json(s3_bucket, run_json_key)
    # The first run.json says the run never finished, and is enough to read its segments.
    assert started["exit_reason"] == "running"
    assert started["anchor_unix_ns"] > 0
    with pytest.warns(UserWarning, match="did not finish"):
        summary = la.op_summary(s3_bucket.url("lost"))
    assert int(summary["requests"].sum()) > 0


def test_a_bucket_that_goes_away_mid_run_keeps_the_run_locally_and_exits_1(
    binaries: Binaries, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import boto3
    from moto.server import ThreadedMotoServer

    store = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    store.start()
    host, port = store.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name, value in S3_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="gone-bucket"
    )
    with harness.Server(binary=binaries.server) as server:
        proc = _start_segmenting_run(binaries, server.url, "3s", "s3://gone-bucket/run")
        time.sleep(1.0)
        store.stop()  # the store vanishes while the load goes on
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr.decode()
    console = stdout.decode()
    assert "did not reach s3://gone-bucket/run/" in console, console
    (staging,) = list(tmp_path.glob("loadgen-*"))
    assert str(staging) in console
    # Everything is still there, complete: the run as any local run.
    run = la.load_run(staging)
    assert json.loads((staging / "run.json").read_text())["exit_reason"] == "duration_elapsed"
    assert run.rows > 0
    assert int(la.op_summary(staging)["requests"].sum()) == run.rows
