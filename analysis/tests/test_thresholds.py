"""Thresholds in Python: the same language and proportion convention as loadgen, from the
shared vectors (``contract/thresholds.json``, which loadgen's Rust tests read too), and
``loadgen-analyze summary --threshold`` judging a sharded run's shards together (exit 99)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import loadgen_analysis as la
from loadgen_analysis.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION, EXIT_THRESHOLD
from loadgen_analysis.testing import harness
from loadgen_analysis.thresholds import parse_increase, parse_proportion, parse_threshold

from .conftest import SHARD_RATE, Binaries, ShardSet, run_cli

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "contract" / "thresholds.json").read_text()
)


@pytest.mark.parametrize("case", VECTORS["valid"], ids=lambda c: c["expr"])
def test_valid_thresholds_mean_what_the_vectors_say(case: dict) -> None:
    t = parse_threshold(case["expr"])
    assert (t.metric, t.op, t.comparison, t.unit) == (
        case["metric"],
        case["op"],
        case["comparison"],
        case["unit"],
    )
    assert t.limit == pytest.approx(case["limit"], rel=1e-9)


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=lambda c: c["expr"])
def test_invalid_thresholds_are_refused_as_the_vectors_say(case: dict) -> None:
    with pytest.raises(ValueError) as error:
        parse_threshold(case["expr"])
    assert case["error"] in str(error.value)
    assert "p99<50ms" in str(error.value)


@pytest.mark.parametrize(
    ("kind", "case"),
    [("proportions", c) for c in VECTORS["proportions"]]
    + [("increases", c) for c in VECTORS["increases"]],
    ids=lambda c: c["text"] if isinstance(c, dict) else c,
)
def test_proportions_follow_one_convention(kind: str, case: dict) -> None:
    parse = parse_proportion if kind == "proportions" else parse_increase
    if "value" in case:
        assert parse(case["text"]) == pytest.approx(case["value"])
    else:
        with pytest.raises(ValueError) as error:
            parse(case["text"])
        assert case["error"] in str(error.value)


def test_exit_codes_are_one_table() -> None:
    assert (EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_THRESHOLD) == (0, 1, 2, 99)


def test_compare_limits_and_notebook_limits_share_the_convention(tmp_path: Path) -> None:
    assert la.Limits(max_p99_increase="10%").max_p99_increase == pytest.approx(0.10)
    assert la.Limits(max_p99_increase=0.10).max_p99_increase == pytest.approx(0.10)
    assert la.Limits(max_p99_increase="150%").max_p99_increase == pytest.approx(1.5)
    with pytest.raises(ValueError, match="did you mean 10%"):
        la.Limits(max_p99_increase=10)
    with pytest.raises(ValueError, match="above 100%"):
        la.Limits(max_error_rate="150%")
    # The CLI refuses a bare number >= 1 with the hint, before reading any run.
    proc = run_cli("compare", tmp_path, tmp_path, "--max-p99-increase", "10")
    assert proc.returncode == EXIT_BAD_INPUT
    assert "did you mean 10%?" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    # 1.5 is likelier a ratio (150 %) than a 1.5 % gate: the hint says so, and names both.
    proc = run_cli("compare", tmp_path, tmp_path, "--max-p99-increase", "1.5")
    assert proc.returncode == EXIT_BAD_INPUT
    assert "did you mean 150%?" in proc.stderr and "or 1.5% if" in proc.stderr, proc.stderr
    # --help shows every default limit.
    help_text = " ".join(run_cli("compare", "--help").stdout.split())
    for default in (
        "(default: 10%)",
        "(default: 5%)",
        "(default: 1%)",
        "(default: off)",
        "(default: 95%)",
    ):
        assert default in help_text, help_text


def test_summary_threshold_judges_a_sharded_run_as_one(shard_sets: dict[str, ShardSet]) -> None:
    opened = shard_sets["open"]
    # Each shard did a third of the rate: alone, each fails a bound the whole run meets.
    bound = f"throughput>{0.6 * SHARD_RATE:g}/s"
    whole = run_cli("summary", *opened.shards, "--threshold", bound, "--threshold", "p99<10s")
    assert whole.returncode == EXIT_OK, whole.stdout + whole.stderr
    assert "all 2 passed" in whole.stdout
    alone = run_cli("summary", opened.shards[0], "--threshold", bound)
    assert alone.returncode == EXIT_THRESHOLD, alone.stdout + alone.stderr
    assert "1 of 1 CROSSED (exit code 99)" in alone.stdout
    # Crossed on the merged run: exit 99 and the result in --json.
    crossed = run_cli("summary", opened.folder, "--threshold", "p99<1ns", "--json")
    assert crossed.returncode == EXIT_THRESHOLD, crossed.stderr
    doc = json.loads(crossed.stdout)
    (judged,) = doc["thresholds"]
    assert judged["passed"] is False
    (result,) = judged["results"]
    assert result["threshold"] == "p99<1ns" and result["unit"] == "ns"
    assert result["observed"] > 1 and result["passed"] is False
    # The merged throughput is the rows over the merged run's wall time.
    merged = run_cli("summary", opened.folder, "--threshold", bound, "--json")
    observed = json.loads(merged.stdout)["thresholds"][0]["results"][0]["observed"]
    rows = sum(s["summary"]["requests"] for s in opened.summaries)
    assert observed == pytest.approx(rows / 3.0, rel=0.1)


def test_summary_threshold_bad_input_is_exit_2(shard_sets: dict[str, ShardSet]) -> None:
    folder = shard_sets["closed"].folder
    for expr, needle in (
        ("error_rate<1", "did you mean 1%?"),
        ("p99[nope]<1s", "names op 'nope'"),
    ):
        proc = run_cli("summary", folder, "--threshold", expr)
        assert proc.returncode == EXIT_BAD_INPUT, proc.stdout + proc.stderr
        assert needle in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_summary_threshold_names_an_op_by_its_request_name(
    binaries: Binaries, tmp_path: Path
) -> None:
    """Issue 34 part 7: a selector names an op by its label or by its request's name in the
    scenario (run.json ``request_ops``, as loadgen resolves it); a typo is exit 2 listing
    both spellings of every op."""
    scenario = tmp_path / "one.toml"
    scenario.write_text(
        'sequence = ["get_album"]\n[requests.get_album]\nmethod = "GET"\n'
        'path = "/albums/1"\n[model]\nkind = "closed"\nworkers = 2\nduration = "1s"\n'
    )
    out = tmp_path / "run"
    with harness.Server(binary=binaries.server) as server:
        command = [str(binaries.loadgen), "run", str(scenario), "--url", server.url]
        command += ["--no-progress", "--out", str(out)]
        subprocess.run(command, check=True, capture_output=True, timeout=60)
    ops = json.loads((out / "run.json").read_text())["request_ops"]
    assert ops == {"get_album": "GET /albums/1"}
    by_name = run_cli("summary", out, "--threshold", "p99[get_album]<10s", "--json")
    assert by_name.returncode == EXIT_OK, by_name.stderr
    (result,) = json.loads(by_name.stdout)["thresholds"][0]["results"]
    assert result["op"] == "GET /albums/1" and result["passed"] is True
    typo = run_cli("summary", out, "--threshold", "p99[get_albm]<10s")
    assert typo.returncode == EXIT_BAD_INPUT
    assert "names op 'get_albm'" in typo.stderr and "GET /albums/1 (get_album)" in typo.stderr
