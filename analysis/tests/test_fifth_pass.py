"""Regression tests of issue 45's analysis findings: paths read literally, the history gate
judged against the series' level before its regressions, the pairwise gate that cannot tell,
history of shard sets and capacity folders, and the crashes on valid input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hdrh.log import HistogramLogReader

from loadgen_analysis.export.hlog import new_histogram
from loadgen_analysis.history import gate
from loadgen_analysis.models.identify import not_identifiable
from loadgen_analysis.models.usl import USLFit
from loadgen_analysis.thresholds import EXIT_THRESHOLD

from .conftest import ShardSet, run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


def _figures(summary_json: str) -> list[dict]:
    """A ``summary --json``'s rows without the run's label."""
    return [{k: v for k, v in row.items() if k != "run"} for row in json.loads(summary_json)]


def test_a_path_with_glob_characters_means_itself(tmp_path: Path) -> None:
    """``hc[1]`` must read hc[1], not hc1 (DuckDB reads a path as a pattern)."""
    literal, other = tmp_path / "hc[1]", tmp_path / "hc1"
    shutil.copytree(DATA / "overview", literal)
    shutil.copytree(DATA / "regression" / "candidate-8ms" / "r1", other)
    mine = run_cli("summary", literal, "--json")
    theirs = run_cli("summary", other, "--json")
    assert mine.returncode == 0 and theirs.returncode == 0, mine.stderr + theirs.stderr
    expected = run_cli("summary", DATA / "overview", "--json")
    assert _figures(mine.stdout) == _figures(expected.stdout) != _figures(theirs.stdout)
    # A history store whose folder name holds a pattern reads its own files only.
    for store, run in (("st[1]", literal), ("st1", other)):
        added = run_cli("history", "add", run, "--store", tmp_path / store)
        assert added.returncode == 0, added.stderr
    shown = run_cli("history", "show", "--store", tmp_path / "st[1]", "--json")
    assert shown.returncode == 0, shown.stderr
    own = run_cli("history", "show", "--store", tmp_path / "st1", "--json")
    assert shown.stdout != own.stdout


#: A few tenths of a percent of deterministic noise, so no level is a constant.
_NOISE = (1.5, -1.0, 0.5, -1.5, 1.0, -0.5)


def _throughput(levels: list[tuple[float, int]]) -> pd.DataFrame:
    """A history of one series whose throughput holds each (level, runs) in turn."""
    values = [
        level * (1 + _NOISE[i % len(_NOISE)] / 1000)
        for i, level in enumerate(v for level, runs in levels for v in [level] * runs)
    ]
    n = len(values)
    return pd.DataFrame(
        {
            "fingerprint": "f",
            "op": "op",
            "run_id": [f"r{i:02d}" for i in range(n)],
            "started_unix_ns": range(n),
            "build": None,
            "commit": None,
            "throughput_rps": values,
        }
    )


def _nightly(history: pd.DataFrame, first: int) -> dict[int, int]:
    """The gate's exit code (limit 5 %) each night from run ``first`` on, by run number."""
    return {
        n: gate.check(history.iloc[:n], 0.05, ("throughput_rps",)).exit_code
        for n in range(first, len(history) + 1)
    }


def test_the_history_gate_fails_a_creep_of_small_steps() -> None:
    """Four −3 % steps (500 → 443 req/s): each within 5 %, together −11.5 %."""
    levels = [500 * 0.97**k for k in range(5)]
    history = _throughput([(level, 8) for level in levels])
    nights = _nightly(history, 36)
    assert set(nights.values()) == {EXIT_THRESHOLD}, nights
    (judged,) = gate.check(history, 0.05, ("throughput_rps",)).judgements
    assert judged.status == "regression"
    assert judged.baseline is not None and judged.baseline.mean == pytest.approx(500, rel=0.01)
    assert judged.change == pytest.approx(-0.115, abs=0.01)
    assert "before its regressions" in judged.describe(0.05)


def test_the_history_gate_fails_a_partial_recovery() -> None:
    """500 → 300 for two runs, then 400: 20 % below where it was, every night from the drop."""
    history = _throughput([(500, 10), (300, 2), (400, 10)])
    nights = _nightly(history, 13)
    assert set(nights.values()) == {EXIT_THRESHOLD}, nights
    # A full recovery passes, and so does a step up.
    recovered = _throughput([(500, 10), (300, 2), (500, 10)])
    assert gate.check(recovered, 0.05, ("throughput_rps",)).exit_code == 0
    better = _throughput([(500, 10), (600, 10)])
    (judged,) = gate.check(better, 0.05, ("throughput_rps",)).judgements
    assert judged.status == "improvement"


def test_a_pairwise_gate_that_cannot_tell_fails_asking_for_more_runs() -> None:
    """One run per side: p90 +25 % beyond a 10 % limit, its interval including no change
    (the recorded samples' r1: p90 6.9 → 8.5 ms, CI of the change [−0.8, +36.6] %)."""
    baseline = DATA / "regression" / "baseline-5ms" / "r1"
    candidate = DATA / "regression" / "candidate-8ms" / "r1"
    limits = ("--max-p90-increase", "10%", "--max-throughput-drop", "90%")
    proc = run_cli("compare", baseline, candidate, *limits)
    assert "noisy" in proc.stdout, proc.stdout
    assert proc.returncode == 1, proc.stdout
    assert "FAIL (cannot tell): p90" in proc.stdout and "more runs per side" in proc.stdout
    data = json.loads(run_cli("compare", baseline, candidate, *limits, "--json").stdout)
    assert data["passed"] is False


@pytest.mark.parametrize("kappa", [5e-324, 1e-310, 1e-300, 0.0, math.nan])
def test_a_usl_fit_whose_kappa_underflows_has_no_finite_knee_and_does_not_crash(
    kappa: float,
) -> None:
    """κ on the smallest positive float (where one machine's optimizer landed for
    ``fit_usl([1, 2, 4], [100, 199, 396])``) overflowed ⌊√((1−σ)/κ)⌋; built directly, so the
    test does not depend on one machine's floating-point path."""
    fit = USLFit(100.0, 0.005, kappa, 0.99, 1.0, (math.nan,) * 3, 3)
    assert fit.n_max == math.inf or fit.n_max > 1e100
    assert math.isfinite(fit.x_max) and fit.x_max > 0
    assert "κ=" in fit.label() and fit.as_dict()["n_max"] == fit.n_max
    assert not_identifiable(fit, [1, 2, 4], [100.0, 199.0, 396.0]) is not None
    # σ ≥ 1: throughput falls from the first level on; a knee of 0, not a math error.
    assert USLFit(100.0, 1.5, 1e-3, 0.9, 1.0, (math.nan,) * 3, 3).n_max == 0.0


def _all_warmup(tmp_path: Path) -> Path:
    """The overview run with every row relabelled as the warm-up's (run.json saying so)."""
    run = tmp_path / "all-warmup"
    shutil.copytree(DATA / "overview", run)
    segment = run / "requests" / "part-00000.parquet"
    table = pq.read_table(segment)
    phase = table.column("phase").combine_chunks()
    warm = pa.DictionaryArray.from_arrays(pa.array([0] * len(table), pa.int32()), phase.dictionary)
    table = table.set_column(
        table.schema.get_field_index("phase"), table.schema.field("phase"), warm
    )
    ours = {
        k: v for k, v in pq.read_metadata(segment).metadata.items() if k.startswith(b"loadgen.")
    }
    pq.write_table(table.replace_schema_metadata(ours), segment)
    doc = json.loads((run / "run.json").read_text())
    doc["summary"]["warmup_requests"] = len(table)
    (run / "run.json").write_text(json.dumps(doc))
    return run


def test_history_add_of_an_all_warmup_run_and_a_foreign_file_are_one_clear_line(
    tmp_path: Path,
) -> None:
    added = run_cli("history", "add", _all_warmup(tmp_path), "--store", tmp_path / "st")
    assert added.returncode == 2 and "no judged requests" in added.stderr, added.stderr
    assert "KeyError" not in added.stderr and len(added.stderr.strip().splitlines()) == 1
    store = tmp_path / "store"
    assert run_cli("history", "add", DATA / "overview", "--store", store).returncode == 0
    shutil.copy(DATA / "overview" / "requests" / "part-00000.parquet", store / "segment.parquet")
    for command in ("show", "check"):
        proc = run_cli("history", command, "--store", store)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "segment.parquet is not a history file" in proc.stderr, proc.stderr


def test_history_add_refuses_a_store_inside_a_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "overview", run)
    proc = run_cli("history", "add", run, "--store", run / "requests")
    assert proc.returncode == 2 and "--store" in proc.stderr, proc.stderr
    assert sorted(p.name for p in (run / "requests").iterdir()) == ["part-00000.parquet"]
    assert run_cli("summary", run).returncode == 0


def _capacity(tmp_path: Path, converged: bool) -> Path:
    where = tmp_path / ("converged" if converged else "unconverged")
    shutil.copytree(DATA / "capacity-w8-10ms", where)
    if not converged:
        doc = json.loads((where / "capacity.json").read_text())
        doc |= {"converged": False, "ended": "budget"}
        (where / "capacity.json").write_text(json.dumps(doc))
    return where


def test_history_add_of_a_folder_adds_its_capacity_directory_and_marks_an_unconverged_one(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "nightly"
    folder.mkdir()
    shutil.copytree(DATA / "overview", folder / "run")
    _capacity(folder, converged=True)
    store = tmp_path / "store"
    proc = run_cli("history", "add", folder, "--store", store)
    assert proc.returncode == 0, proc.stderr
    history = pd.read_parquet(store)
    assert sorted(history["kind"].unique()) == ["capacity", "run"], proc.stdout
    lone = tmp_path / "lone"
    proc = run_cli("history", "add", _capacity(tmp_path, converged=False), "--store", lone)
    assert proc.returncode == 0, proc.stderr
    low = json.loads((DATA / "capacity-w8-10ms" / "capacity.json").read_text())["interval"][0]
    assert "did not converge" in proc.stdout and f"lower bound {low:g} req/s" in proc.stdout
    (row,) = pd.read_parquet(lone).to_dict("records")
    assert pd.isna(row["capacity_rps"]) and row["capacity_low_rps"] == low


def test_history_add_of_shard_directories_given_one_by_one_is_one_run(
    shard_sets: dict[str, ShardSet], tmp_path: Path
) -> None:
    shards = next(iter(shard_sets.values()))
    store = tmp_path / "store"
    proc = run_cli("history", "add", *shards.shards, "--store", store)
    assert proc.returncode == 0, proc.stderr
    history = pd.read_parquet(store)
    assert history["run_id"].nunique() == 1, proc.stdout
    whole = sum(int(s["summary"]["requests"]) for s in shards.summaries)
    assert int(history["requests"].sum()) == whole


def test_summary_of_a_run_with_no_judged_rows_is_a_sentence(tmp_path: Path) -> None:
    proc = run_cli("summary", _all_warmup(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Empty DataFrame" not in proc.stdout and "no judged requests" in proc.stdout


def test_export_to_an_existing_directory_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("export", DATA / "overview", "--format", "csv", "-o", out)
    assert proc.returncode == 2 and "is a directory" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_the_hlog_has_untagged_all_op_intervals_and_a_fractional_max(tmp_path: Path) -> None:
    out = tmp_path / "r.hlog"
    assert run_cli("export", DATA / "overview", "--format", "hlog", "-o", out).returncode == 0
    lines = [x for x in out.read_text().splitlines() if x and not x.startswith(("#", '"'))]
    untagged = [x for x in lines if not x.startswith("Tag=")]
    tagged = [x for x in lines if x.startswith("Tag=")]
    assert untagged and tagged
    maxima = [float(x.split(",")[2]) for x in untagged]
    assert all(m > 0 for m in maxima), maxima[:5]  # sub-millisecond maxima are not 0.000
    assert any(m != int(m) for m in maxima)
    reader = HistogramLogReader(str(out), new_histogram())
    totals: dict[object, int] = {}
    while (interval := reader.get_next_interval_histogram()) is not None:
        key = interval.get_tag()
        totals[key] = totals.get(key, 0) + interval.get_total_count()
    assert totals[None] == sum(n for key, n in totals.items() if key is not None)


def test_a_control_character_in_a_label_never_makes_the_junit_invalid(tmp_path: Path) -> None:
    history = _throughput([(500, 10), (300, 10)])
    history["commit"] = "abc\x01def"
    xml = gate.gate_junit(gate.check(history, 0.05, ("throughput_rps",)))
    assert "\x01" in gate.check(history, 0.05, ("throughput_rps",)).to_text()
    assert ElementTree.fromstring(xml).get("failures") == "1"
    proc = run_cli("history", "add", DATA / "overview", "--store", tmp_path, "--label", "c=\x01")
    assert proc.returncode == 2 and "control character" in proc.stderr, proc.stderr
