"""Sharded runs: the shard directories of one ``loadgen run --shard I/N`` run, recorded by
three real processes started together with ``--start-at``, analyse as one run — the same
counts and per-second timeline as one unsharded process making the same load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import loadgen_analysis as la
from loadgen_analysis.report.html import build_report

from .conftest import SHARD_RATE, SHARDS, ShardSet, run_cli

# Processes started at one --start-at on one machine begin within a few ms of each other; the
# bound leaves room for a loaded CI machine, not for a shard that waited for nothing.
MAX_START_SKEW_MS = 250.0


def _counts(frame) -> dict[str, tuple[int, int, int]]:
    return {
        r.op: (int(r.requests), int(r.ok), int(r.failed)) for r in frame.itertuples(index=False)
    }


def test_a_folder_of_shards_is_one_run(shard_sets: dict[str, ShardSet]) -> None:
    closed = shard_sets["closed"]
    (run,) = la.load_runs([closed.folder])
    assert run.shards and run.is_complete and run.missing_shards == ()
    assert run.shard_count == SHARDS
    assert [s.shard for s in run.shards] == [(i, SHARDS) for i in range(SHARDS)]
    assert run.label == closed.folder.name
    assert run.rows == sum(s["summary"]["requests"] for s in closed.summaries)
    # load_run on the folder, and the shard directories given one by one, are the same run.
    assert la.load_run(closed.folder).rows == run.rows
    (loose,) = la.load_runs(list(closed.shards))
    assert loose.rows == run.rows and loose.label.endswith(f"-shards-of-{SHARDS}")
    assert [s.path for s in la.as_runs([str(p) for p in closed.shards])[0].shards] == list(
        closed.shards
    )


def test_merged_counts_equal_the_unsharded_run(shard_sets: dict[str, ShardSet]) -> None:
    closed = shard_sets["closed"]
    merged = la.op_summary(closed.folder)
    whole = la.op_summary(closed.unsharded)
    assert _counts(merged) == _counts(whole)
    assert int(merged["requests"].sum()) == 600
    # Configured concurrency: the shards' slices of -c 6 add up to the unsharded run's.
    (run,) = la.load_runs([closed.folder])
    assert [s.connections for s in run.shards] == [2, 2, 2]
    assert run.connections == la.load_run(closed.unsharded).connections == 6
    table = la.run_table([closed.folder, closed.unsharded])
    assert table["connections"].tolist() == [6, 6]
    assert table["workers_seen"].tolist() == [6, 6]
    assert (table["n_eff"] <= 6 + 1e-9).all()


def test_worker_ids_are_unique_across_shards(shard_sets: dict[str, ShardSet]) -> None:
    closed = shard_sets["closed"]
    con = la.connect(la.load_runs([closed.folder]))
    per_shard = dict(
        con.execute(
            "SELECT shard_index, list(DISTINCT worker ORDER BY worker) FROM records GROUP BY 1"
        ).fetchall()
    )
    workers = [set(per_shard[i]) for i in range(SHARDS)]
    assert sum(len(w) for w in workers) == len(set().union(*workers)), per_shard
    assert set().union(*workers) == set(range(6))
    # Shard I numbers its workers I, I + N, …
    assert workers[1] == {1, 4}


def test_open_model_timeline_lines_up_with_the_unsharded_one(
    shard_sets: dict[str, ShardSet],
) -> None:
    opened = shard_sets["open"]
    merged = la.timeline(opened.folder, by_phase=False)
    whole = la.timeline(opened.unsharded, by_phase=False)
    assert int(merged["requests"].sum()) == pytest.approx(int(whole["requests"].sum()), abs=3)
    merged_s = dict(zip(merged["t_s"], merged["requests"], strict=True))
    whole_s = dict(zip(whole["t_s"], whole["requests"], strict=True))
    # The three full seconds of a 3 s run; each within 3 % (a few requests either side of a
    # second's boundary) of the unsharded run's. Against the rate only the whole run is held:
    # a stall of the busy machine moves a second's completions into the next (288, 300, 300
    # and 12 after the end, in one CI run), which the unsharded run, made beside it, shares.
    for second in (0.0, 1.0, 2.0):
        assert merged_s[second] == pytest.approx(whole_s[second], rel=0.03), (merged_s, whole_s)
    assert sum(merged_s.values()) == pytest.approx(3 * SHARD_RATE, abs=3), merged_s
    # Rebased on the wall clock: the shards' first requests are as close as their starts.
    rows = la.shard_table(opened.folder)
    assert rows["first_request_skew_ms"].iloc[0] < MAX_START_SKEW_MS


def test_shard_table_reports_shares_and_skew(shard_sets: dict[str, ShardSet]) -> None:
    closed = shard_sets["closed"]
    table = la.shard_table([closed.folder, closed.unsharded])
    assert table["shard"].tolist() == [f"{i}/{SHARDS}" for i in range(SHARDS)]
    assert (table["shards"] == SHARDS).all() and table["complete"].all()
    assert table["requests"].tolist() == [200, 200, 200]
    assert table["share_pct"].sum() == pytest.approx(100.0)
    assert table["workers"].tolist() == [2, 2, 2]
    assert (table["start_offset_ms"] >= 0).all()
    assert table["first_request_skew_ms"].iloc[0] < MAX_START_SKEW_MS
    assert table["start_offset_skew_ms"].iloc[0] < MAX_START_SKEW_MS
    for summary, offset in zip(closed.summaries, table["start_offset_ms"], strict=True):
        run_json = json.loads((Path(summary["run_dir"]) / "run.json").read_text())
        assert offset == pytest.approx(run_json["start_offset_ns"] / 1e6)
    assert la.shard_table(closed.unsharded).empty


def test_two_sharded_runs_in_one_folder_stay_apart(
    shard_sets: dict[str, ShardSet], tmp_path: Path
) -> None:
    both = tmp_path / "both"
    for kind in ("closed", "open"):
        for shard in shard_sets[kind].shards:
            shutil.copytree(shard, both / f"{kind}-{shard.name}")
    runs = la.load_runs([both])
    assert len(runs) == 2
    assert sorted(len(r.shards) for r in runs) == [SHARDS, SHARDS]
    assert {r.model for r in runs} == {"closed", "open"}
    assert len({r.label for r in runs}) == 2


def test_a_folder_of_unsharded_runs_is_still_a_sweep(capacity_sweep: list[Path]) -> None:
    runs = la.load_runs([capacity_sweep[0].parent])
    assert len(runs) == len(capacity_sweep)
    assert not any(r.shards for r in runs)
    assert la.shard_table(runs).empty


def test_an_incomplete_set_is_analysed_with_a_warning(
    shard_sets: dict[str, ShardSet], tmp_path: Path
) -> None:
    closed = shard_sets["closed"]
    partial = tmp_path / "partial"
    for shard in (closed.shards[0], closed.shards[2]):
        shutil.copytree(shard, partial / shard.name)
    with pytest.warns(la.IncompleteShardSetWarning, match=r"2 of 3 shards \(missing 1/3\)"):
        (run,) = la.load_runs([partial])
    assert run.missing_shards == (1,) and not run.is_complete
    assert run.rows == 400 and run.connections == 4
    table = la.shard_table(run)
    assert table["share_pct"].tolist() == [50.0, 50.0]
    assert not table["complete"].any()

    proc = run_cli("summary", partial)
    assert proc.returncode == 0, proc.stderr
    assert "warning" in proc.stderr and "incomplete sharded run" in proc.stderr
    assert "2 of 3 shards — INCOMPLETE, missing 1/3" in proc.stdout

    text = build_report(run)
    assert "Incomplete sharded run" in text and "missing 1/3" in text


def test_a_shard_lost_before_writing_run_json_still_joins_its_run(
    shard_sets: dict[str, ShardSet], tmp_path: Path
) -> None:
    """A killed process leaves segments but no run.json; they carry --start-at themselves."""
    closed = shard_sets["closed"]
    folder = tmp_path / "lost"
    for shard in closed.shards:
        shutil.copytree(shard, folder / shard.name)
    (folder / closed.shards[1].name / "run.json").unlink()
    with pytest.warns(UserWarning, match="run.json"):
        (run,) = la.load_runs([folder])
    assert run.is_complete and run.shard_count == SHARDS
    assert run.rows == sum(s["summary"]["requests"] for s in closed.summaries)


def test_duplicate_shards_are_refused(shard_sets: dict[str, ShardSet], tmp_path: Path) -> None:
    closed = shard_sets["closed"]
    dup = tmp_path / "dup"
    for shard in closed.shards:
        shutil.copytree(shard, dup / shard.name)
    shutil.copytree(closed.shards[1], dup / "shard-1-rerun")
    with pytest.raises(la.RunLoadError, match=r"both shard 1/3 of the same run"):
        la.load_runs([dup])
    proc = run_cli("summary", dup)
    assert proc.returncode == 2
    assert "both shard 1/3" in proc.stderr


def test_mixed_shard_counts_are_refused(shard_sets: dict[str, ShardSet], tmp_path: Path) -> None:
    closed = shard_sets["closed"]
    mixed = tmp_path / "mixed"
    for shard in closed.shards:
        shutil.copytree(shard, mixed / shard.name)
    # A shard started with the same --start-at but --shard 1/2: the launch was misconfigured.
    run_json = mixed / closed.shards[2].name / "run.json"
    meta = json.loads(run_json.read_text())
    meta["shard"] = "1/2"
    run_json.write_text(json.dumps(meta))
    with pytest.raises(la.RunLoadError, match="disagree on the number of shards"):
        la.load_runs([mixed])


def test_summary_and_report_show_the_shards(shard_sets: dict[str, ShardSet]) -> None:
    closed = shard_sets["closed"]
    proc = run_cli("summary", closed.folder)
    assert proc.returncode == 0, proc.stderr
    assert f"{closed.folder.name}: 3 of 3 shards; start skew" in proc.stdout
    assert "33.3" in proc.stdout
    assert "warning" not in proc.stderr

    text = build_report(closed.folder)
    assert "<h2>Shards</h2>" in text and "3 of 3 shards" in text
    assert "Incomplete" not in text
