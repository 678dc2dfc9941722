"""Models that fit the run (issue 34): an open-rate sweep is modelled over the offered rate,
never over N, and its knee is the highest rate kept up with; a closed sweep keeps its USL and
bounds; a fit whose knee lies far outside the measured range is not identifiable and is not
drawn; runs of different models never share an axis of N; ``explain`` and ``report`` say the
same. Real runs: ``loadgen sweep`` against ``loadgen-server`` with 8 workers × 10 ms
(800 req/s)."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

import loadgen_analysis as la
from loadgen_analysis.models.bounds import fit_bounds
from loadgen_analysis.models.identify import (
    MAX_KNEE_BEYOND_N,
    MAX_XMAX_BEYOND_X,
    not_identifiable,
)
from loadgen_analysis.models.rate_sweep import achieved_shortfall, kept_up, rate_sweep
from loadgen_analysis.models.usl import fit_usl
from loadgen_analysis.testing import model_testbeds, testbeds

from .conftest import CAPACITY_RPS, SWEEP_CAPACITY_RPS, Binaries, run_cli

CONTRACT = Path(__file__).resolve().parents[2] / "contract" / "sustainability.json"
#: Two rates far below the 800 req/s capacity and one at twice it.
RATE_LEVELS = model_testbeds.RATE_SWEEP_RPS
#: The report's heading of a sweep over N.
LITTLE_HEADING = "<h2>Little's Law</h2>"


@pytest.fixture(scope="module")
def open_sweep(binaries: Binaries, runs_root: Path) -> Path:
    """The open-rate sweep testbed: ``loadgen sweep --rate-levels 100,200,1600`` against the
    800 req/s server, at most 64 in flight (the overloaded level drops sends at once)."""
    return model_testbeds.record_rate_sweep(binaries, runs_root / "open-rate-sweep").path


# --------------------------------------------------------------------------- the rules


def test_the_contract_vectors_decide_kept_up() -> None:
    contract = json.loads(CONTRACT.read_text())
    assert achieved_shortfall() == contract["achieved_shortfall"]
    for v in contract["vectors"]:
        assert kept_up(v["dropped"], v["sent"], v["completed"]) is v["kept"], v


def test_capacity_judges_by_the_contracts_shortfall_not_a_number_of_its_own() -> None:
    """One number in two languages is a defect: the engine's schedule rule (verdict/schedule.rs,
    which capacity's levels and every open run share) reads the contract's file, which the
    verdict's rules compile in (verdict/rule.rs; its Rust test holds the same vectors), and
    writes no shortfall itself."""
    verdict = CONTRACT.parents[1] / "loadgen" / "src" / "verdict"
    rule = (verdict / "rule.rs").read_text()
    assert 'include_str!("../../../contract/sustainability.json")' in rule
    for name in ("schedule.rs", "rule.rs", "slo.rs", "decide.rs"):
        text = (verdict / name).read_text()
        assert re.search(r"ACHIEVED_SHORTFALL: f64 = [0-9.]+;", text) is None
        assert re.search(r"\b0\.02\b", text) is None, name
    assert "use super::rule::S;" in (verdict / "schedule.rs").read_text()


def test_a_usl_fit_of_a_sweep_that_never_bent_is_not_identifiable() -> None:
    # Throughput proportional to N: the USL has no peak (κ = 0) or one far beyond the data.
    rising = fit_usl([1, 2, 4], [100.0, 200.0, 400.0])
    assert not_identifiable(rising, [1, 2, 4], [100.0, 200.0, 400.0]) is not None
    bent = fit_usl([1, 2, 4], [100.0, 199.0, 396.0])
    assert bent.n_max > MAX_KNEE_BEYOND_N * 4 or bent.x_max > MAX_XMAX_BEYOND_X * 396
    assert "the sweep did not reach" in (not_identifiable(bent, [1, 2, 4], [100, 199, 396]) or "")


def test_a_knee_inside_the_range_is_identifiable_and_one_outside_is_not() -> None:
    n = [1, 2, 4, 8, 16]
    x = [100.0, 200.0, 400.0, 500.0, 500.0]
    inside = fit_bounds(n, x)
    assert not_identifiable(inside, n, x) is None
    # The same shape measured only up to N = 1: its knee (5) is beyond 4 × 1.
    reason = not_identifiable(inside, [1, 1], [100.0, 100.0])
    assert reason is not None and "knee N = 5" in reason
    # An X_max 5× what was measured is beyond 1.5×.
    reason = not_identifiable(inside, [4, 4], [100.0, 100.0])
    assert reason is not None and "X_max 500" in reason


def test_the_bounds_need_two_points_on_their_plateau() -> None:
    n = [1, 2, 4, 8]
    rising = fit_bounds(n, [100.0, 200.0, 400.0, 800.0])
    assert rising.plateau_points < 2
    assert "on its plateau" in (not_identifiable(rising, n, [100, 200, 400, 800]) or "")
    # The last level a little under the line: one point is not a plateau.
    dipped = [100.0, 200.0, 400.0, 760.0]
    one = fit_bounds(n, dipped)
    assert one.plateau_points == 1 and not_identifiable(one, n, dipped) is not None
    flat = [100.0, 200.0, 400.0, 400.0]
    two = fit_bounds(n, flat)
    assert two.plateau_points >= 2 and not_identifiable(two, n, flat) is None


def test_a_sweep_that_never_bent_gets_no_model_and_says_why() -> None:
    """The issue's example: levels that all still rise. explain and report read the same
    Attribution: no capacity model, and a note per fit saying why it is not identifiable."""
    table = pd.DataFrame({"connections": [1, 2, 4], "throughput_rps": [100.0, 200.0, 400.0]})
    result = la.attribute(table)
    assert result.capacity_model is None
    assert result.usl is not None and result.bounds is not None
    notes = [c for c in result.caveats if "not identifiable, not drawn" in c]
    assert {n.split()[0] for n in notes} == {"usl", "bounds"}
    assert "capacity_model" not in result.explain_dict("table")


# --------------------------------------------------------------------------- real sweeps


def test_an_open_rate_sweep_gets_its_knee_from_achieved_against_offered(open_sweep: Path) -> None:
    runs = la.load_runs([open_sweep])
    sweep = rate_sweep(runs)
    levels = sweep.levels
    assert list(levels["offered_rps"]) == [float(r) for r in RATE_LEVELS]
    assert list(levels["kept"]) == [True, True, False]
    overloaded = levels.iloc[-1]
    assert overloaded["dropped"] > 0
    assert overloaded["achieved_rps"] < 1.1 * CAPACITY_RPS
    assert sweep.knee_rps == 200.0
    result = la.attribute(runs)
    assert result.rate_sweep is not None and result.rate_sweep.knee_rps == 200.0
    assert result.capacity_model is None and result.usl is None and result.bounds is None
    assert result.verdict == "server" and result.capacity_rps == 200.0
    assert "kept up to 200 req/s" in result.finding("server").summary


def test_the_open_rate_sweep_testbed_row_is_right(open_sweep: Path) -> None:
    testbed = model_testbeds.by_name("open-rate sweep")
    verdict = testbeds.explain(testbeds.Recording(open_sweep, {}))
    assert testbed.right(verdict), verdict["summary"]
    assert not testbed.right({**verdict, "capacity_model": {"name": "usl"}})


def test_explain_and_report_of_an_open_sweep_agree_and_draw_no_n_model(
    open_sweep: Path, tmp_path: Path
) -> None:
    explained = run_cli("explain", "--json", open_sweep)
    assert explained.returncode == 0, explained.stderr
    verdict = json.loads(explained.stdout)
    assert "capacity_model" not in verdict
    assert verdict["rate_sweep"]["knee_rps"] == 200.0
    server = next(c for c in verdict["checks"] if c["name"] == "server")
    plots = tmp_path / "plots"
    made = run_cli("report", open_sweep, "-o", tmp_path / "r.html", "--plots", plots)
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "r.html").read_text()
    assert html.escape(server["evidence"]) in page
    assert f"Verdict: {verdict['verdict']}</b>" in page
    assert LITTLE_HEADING not in page
    assert "Capacity model" not in page
    names = sorted(p.name for p in plots.glob("*.png"))
    assert any("open-rate-sweep" in n for n in names)
    assert not any("concurrency" in n for n in names), names


def test_a_closed_sweep_still_gets_its_usl_and_bounds(capacity_sweep: list[Path]) -> None:
    result = la.attribute(la.load_runs(capacity_sweep))
    assert result.rate_sweep is None
    assert result.usl is not None and result.bounds is not None
    chosen = result.capacity_model
    assert chosen is not None
    sweep = la.run_table(la.load_runs(capacity_sweep))
    assert not_identifiable(chosen, sweep["connections"], sweep["throughput_rps"]) is None
    assert math.isfinite(chosen.x_max)
    assert chosen.x_max == pytest.approx(SWEEP_CAPACITY_RPS, rel=0.25)
    assert not any("not identifiable" in c for c in result.caveats if chosen.name in c)


def test_open_and_closed_runs_are_never_on_one_axis_of_n(
    open_sweep: Path, capacity_sweep: list[Path], tmp_path: Path
) -> None:
    runs = la.load_runs([open_sweep, *capacity_sweep])
    result = la.attribute(runs)
    assert result.capacity_model is None and result.rate_sweep is None
    assert "runs of different models" in result.finding("server").summary
    made = run_cli("report", open_sweep, *capacity_sweep, "-o", tmp_path / "mixed.html")
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "mixed.html").read_text()
    assert "Runs of different models" in page
    little = page.split(LITTLE_HEADING)
    assert len(little) == 2, "one Little's-Law table, of the closed runs"
    table = little[1].split("</table>")[0]
    assert "c0001" in table
    assert not any(f"rate-{r}" in table for r in RATE_LEVELS)


def test_no_verdict_threshold_is_written_in_two_languages() -> None:
    """Every verdict has one owner (issues 34, 43): the engine decides it by
    contract/verdict.json's thresholds — the client's CPU and throttling shares and a capacity
    level's abort rule among them — and the open-model schedule and latency-growth rule by
    contract/sustainability.json's; no source file of either language writes one of those
    numbers under its name (nor under the constants they once had), and the analysis has no
    check of its own for a run's client, network or schedule."""
    root = CONTRACT.parents[1]
    rules = {
        **json.loads((root / "contract" / "verdict.json").read_text()),
        **json.loads(CONTRACT.read_text()),
    }
    names = [k for k, v in rules.items() if isinstance(v, int | float) and not isinstance(v, bool)]
    assert {
        "max_error_rate",
        "min_server_wait_share",
        "late_share",
        "achieved_shortfall",
        "client_cpu_saturated_percent",
        "client_throttled_periods_share",
        "level_abort_error_share",
        "level_abort_latency_factor",
        "level_abort_min_rows",
        "growth_slope_t",
        "material_growth",
    } <= set(names)
    gone = [
        "SLOPE_T",
        "MATERIAL_GROWTH",
        "ABORT_ERROR_SHARE",
        "ABORT_LATENCY_FACTOR",
        "SATURATED_PERCENT",
        "THROTTLED_PERIODS_SHARE",
        "THROTTLED_WALL_SHARE",
        "ACHIEVED_SHORTFALL",
    ]
    python = list((root / "analysis" / "loadgen_analysis").rglob("*.py"))
    rust = list((root / "loadgen" / "src").rglob("*.rs"))
    for path in python + rust:
        text = path.read_text()
        for name in names:
            literal = rf"\b{name}\b\s*(:\s*\w+\s*)?=\s*[0-9.]+"
            constant = rf"const {name.upper()}\b"
            assert re.search(literal, text) is None, f"{path}: {name} written as a number"
            assert re.search(constant, text) is None, f"{path}: {name} written as a constant"
        for name in gone:
            assert re.search(rf"\b{name}\b", text) is None, f"{path}: {name} is back"
    verdict = root / "analysis" / "loadgen_analysis" / "verdict"
    for gone_module in ("client_check.py", "network_check.py", "pacing.py", "model_facts.py"):
        assert not (verdict / gone_module).exists(), gone_module
    rule = (root / "loadgen" / "src" / "verdict" / "rule.rs").read_text()
    assert 'include_str!("../../../contract/verdict.json")' in rule
    assert 'include_str!("../../../contract/sustainability.json")' in rule
