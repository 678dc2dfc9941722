"""The regression gate: baseline against candidate, per op, with confidence intervals.

Responsible for comparing throughput, p50/p90/p99/p99.9 latency and error rate of one or more
baseline runs with one or more candidate runs, attaching a confidence interval to every change,
and turning the limits a release sets into a verdict per metric and an exit code.

Confidence intervals:

* **repeated runs** (two or more runs on each side): each run is one observation; the interval
  is Welch's t interval on the difference of mean log values, i.e. on the ratio
  candidate / baseline.
* **block bootstrap** (otherwise): each run is cut into equal time windows by completion time;
  windows are resampled with replacement (per side, independently) and the metric recomputed
  from the resampled windows' counts and latency histograms (0.1 % log buckets, HDR-like),
  which keeps the autocorrelation inside a window that a per-request bootstrap would break.

Verdicts: a limited metric **fails** when its change is beyond the limit (the minimum effect
that matters) *and* the interval excludes no change (the effect is not noise); it is
**noisy** when the change is beyond the limit but the interval includes no change, and
**pass** otherwise. A noisy metric fails the gate too, saying the gate cannot tell and needs
more runs per side: a gate that cannot tell a regression from noise must not pass it. The
error-rate limit is absolute: it fails when the candidate's error rate is above it. Metrics
without a limit are shown, not judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from .io.engine import connect
from .io.load import RunsArg, as_runs
from .io.run import Run
from .jsonable import jsonable
from .models.student_t import t_quantile
from .reductions.cache import reuse_reductions
from .reductions.summary import op_summary, run_walls_ns
from .thresholds import parse_increase
from .units import count

#: Metrics compared, in display order: (column of op_summary, label, higher is worse).
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("throughput_rps", "throughput", False),
    ("p50_ms", "p50", True),
    ("p90_ms", "p90", True),
    ("p99_ms", "p99", True),
    ("p999_ms", "p99.9", True),
    ("error_rate", "error rate", True),
)

_QUANTILES = {"p50_ms": 0.5, "p90_ms": 0.9, "p99_ms": 0.99, "p999_ms": 0.999}
# Histogram buckets 0.1 % wide in log space: as fine as an HDR histogram at 3 digits.
_LOG_BUCKET = math.log1p(1e-3)


@dataclass(frozen=True)
class Limits:
    """What a release tolerates, in the one proportion convention: ``0.10`` or ``"10%"`` (a
    bare number of 1 or more is refused: did you mean 10%?); increases may exceed 100 % when
    written with % (``"150%"``). None: shown but not judged."""

    max_p99_increase: float | str | None = 0.10
    max_throughput_drop: float | str | None = 0.05
    max_error_rate: float | str | None = 0.01
    max_p50_increase: float | str | None = None
    max_p90_increase: float | str | None = None
    max_p999_increase: float | str | None = None

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self)):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                fraction = parse_increase(value)
            except ValueError as exc:
                raise ValueError(f"Limits({name}={value!r}) {exc}") from None
            if not name.endswith("_increase") and fraction > 1:
                raise ValueError(f"Limits({name}={value!r}) is above 100%")
            object.__setattr__(self, name, fraction)

    def for_metric(self, metric: str) -> float | None:
        return {
            "throughput_rps": self.max_throughput_drop,
            "p50_ms": self.max_p50_increase,
            "p90_ms": self.max_p90_increase,
            "p99_ms": self.max_p99_increase,
            "p999_ms": self.max_p999_increase,
            "error_rate": self.max_error_rate,
        }[metric]


@dataclass(frozen=True)
class Comparison:
    """The gate's result: one row per op and metric, and the overall verdict."""

    table: pd.DataFrame
    method: str
    confidence: float
    baseline: tuple[str, ...]
    candidate: tuple[str, ...]
    limits: Limits
    warnings: tuple[str, ...] = field(default=())

    @property
    def failures(self) -> pd.DataFrame:
        """The rows that fail the gate: a limit exceeded (``fail``) or a change beyond a limit
        the gate cannot tell from noise (``noisy``)."""
        return self.table[self.table["verdict"].isin(("fail", "noisy"))]

    @property
    def passed(self) -> bool:
        return self.failures.empty

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def as_dict(self) -> dict[str, Any]:
        rows = [jsonable(rec) for rec in self.table.to_dict("records")]
        return {
            "passed": self.passed,
            "method": self.method,
            "confidence": self.confidence,
            "baseline": list(self.baseline),
            "candidate": list(self.candidate),
            "limits": {k: v for k, v in self.limits.__dict__.items()},
            "warnings": list(self.warnings),
            "metrics": rows,
        }

    def to_text(self) -> str:
        return format_comparison(self)


# --------------------------------------------------------------------------- statistics


def _welch_log_ratio(base: np.ndarray, cand: np.ndarray, confidence: float) -> tuple[float, float]:
    """CI of cand/base − 1 from per-run values, by Welch's t on the log values."""
    if np.any(base <= 0) or np.any(cand <= 0):
        return (math.nan, math.nan)
    lb, lc = np.log(base), np.log(cand)
    vb, vc = lb.var(ddof=1) / len(lb), lc.var(ddof=1) / len(lc)
    diff = lc.mean() - lb.mean()
    se = math.sqrt(vb + vc)
    if se == 0:
        return (math.expm1(diff), math.expm1(diff))
    dof = (vb + vc) ** 2 / (
        (vb**2 / (len(lb) - 1) if vb else 0.0) + (vc**2 / (len(lc) - 1) if vc else 0.0)
    )
    t = t_quantile(0.5 + confidence / 2, dof)
    return (math.expm1(diff - t * se), math.expm1(diff + t * se))


@dataclass
class _Blocks:
    """One side's windows for one op: counts, durations and latency histograms."""

    requests: np.ndarray  # (M,)
    failed: np.ndarray  # (M,)
    duration_s: np.ndarray  # (M,)
    hist: np.ndarray  # (M, U) counts per log bucket
    bucket_ms: np.ndarray  # (U,) upper edge of each bucket, ms


def _blocks(runs: list[Run], windows: int) -> dict[str, _Blocks]:
    con = connect(runs)
    # Each run's wall time from the rollup the op summary already made: not a pass of its own.
    walls = ", ".join(f"({i}, CAST({w} AS BIGINT))" for i, w in run_walls_ns(runs).items())
    wall = f"wall AS (SELECT * FROM (VALUES {walls}) t(run_index, wall_ns))"
    window = (
        f"least(CAST(floor((start_ns + latency_ns - judged_from_ns) * {windows}.0 / wall_ns) "
        "AS BIGINT), "
        f"{windows - 1})"
    )
    # One pass: per op, run, window and latency bucket (NULL for rows without a response)
    # the requests and failures; the window counts and the histograms are sums of it.
    cells = con.execute(
        f"""
        WITH {wall}
        SELECT op, run_index, {window} AS w,
            CASE WHEN status > 0
                THEN CAST(floor(ln(greatest(reported_latency_ns, 1)) / {_LOG_BUCKET}) AS BIGINT)
                END AS b,
            count(*) AS n,
            count(*) FILTER (WHERE error IS NOT NULL) AS failed, any_value(wall_ns) AS wall_ns
        FROM records JOIN wall USING (run_index) GROUP BY ALL
        """
    ).df()
    counts = cells.groupby(["op", "run_index", "w"], as_index=False).agg(
        n=("n", "sum"), failed=("failed", "sum"), wall_ns=("wall_ns", "first")
    )
    hist = cells[cells["b"].notna()].rename(columns={"n": "c"})
    hist = hist.astype({"b": "int64"})[["op", "run_index", "w", "b", "c"]]
    walls = counts.groupby("run_index")["wall_ns"].first()
    out: dict[str, _Blocks] = {}
    for op, op_counts in counts.groupby("op"):
        # Every window of every run is a block, including windows where this op had no rows.
        keys = [(int(r), w) for r in walls.index for w in range(windows)]
        index = {k: i for i, k in enumerate(keys)}
        m = len(keys)
        requests = np.zeros(m)
        failed = np.zeros(m)
        duration = np.array([walls[r] / windows / 1e9 for r, _ in keys])
        for row in op_counts.itertuples(index=False):
            i = index[(int(row.run_index), int(row.w))]
            requests[i] += row.n
            failed[i] += row.failed
        op_hist = hist[hist["op"] == op]
        buckets = np.sort(op_hist["b"].unique()) if not op_hist.empty else np.array([0])
        bpos = {int(b): j for j, b in enumerate(buckets)}
        matrix = np.zeros((m, len(buckets)))
        for row in op_hist.itertuples(index=False):
            matrix[index[(int(row.run_index), int(row.w))], bpos[int(row.b)]] += row.c
        out[str(op)] = _Blocks(
            requests=requests,
            failed=failed,
            duration_s=duration,
            hist=matrix,
            bucket_ms=np.exp((buckets + 1) * _LOG_BUCKET) / 1e6,
        )
    return out


def _bootstrap(blocks: _Blocks, resamples: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Bootstrap distributions of every metric for one side and op."""
    m = len(blocks.requests)
    picks = rng.integers(0, m, size=(resamples, m))
    weights = np.zeros((resamples, m))
    np.add.at(weights, (np.arange(resamples)[:, None], picks), 1.0)
    requests = weights @ blocks.requests
    failed = weights @ blocks.failed
    duration = weights @ blocks.duration_s
    out = {
        "throughput_rps": requests / duration,
        "error_rate": np.divide(
            failed, requests, out=np.full(resamples, np.nan), where=requests > 0
        ),
    }
    hist = weights @ blocks.hist
    cum = np.cumsum(hist, axis=1)
    total = cum[:, -1]
    for metric, q in _QUANTILES.items():
        rank = np.maximum(np.ceil(q * total), 1.0)
        idx = np.argmax(cum >= rank[:, None], axis=1)
        values = blocks.bucket_ms[idx]
        out[metric] = np.where(total > 0, values, np.nan)
    return out


def _wilson(failed: float, n: float, confidence: float) -> tuple[float, float]:
    if n <= 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = failed / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


# --------------------------------------------------------------------------- gate


def _verdict(metric: str, higher_is_worse: bool, row: dict[str, Any], limit: float | None) -> str:
    if limit is None:
        return "—"
    if metric == "error_rate":
        return "fail" if row["candidate"] > limit else "pass"
    delta, low, high = row["delta"], row["ci_low"], row["ci_high"]
    if math.isnan(delta):
        return "n/a"
    if higher_is_worse:
        beyond = delta > limit
        significant = not math.isnan(low) and low > 0
    else:
        beyond = delta < -limit
        significant = not math.isnan(high) and high < 0
    if beyond and significant:
        return "fail"
    if beyond:
        return "noisy"
    return "pass"


def _change(
    metric: str,
    b: pd.DataFrame,
    c: pd.DataFrame,
    confidence: float,
    boot: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None,
) -> tuple[float, float, float, float, float]:
    """One metric of one op (``b``, ``c``: its summary rows, one per run): baseline, candidate,
    change, and the change's confidence interval — Wilson's for the error rate (in percentage
    points), else by Welch's t over repeated runs or, with ``boot`` (the op's baseline and
    candidate bootstrap resamples), by the block bootstrap."""
    if metric == "error_rate":
        bv = float(b["failed"].sum() / b["requests"].sum())
        cv = float(c["failed"].sum() / c["requests"].sum())
        failed, requests = float(c["failed"].sum()), float(c["requests"].sum())
        low, high = _wilson(failed, requests, confidence)
        return bv, cv, cv - bv, low, high  # percentage points, not relative
    bv, cv = float(b[metric].mean()), float(c[metric].mean())
    delta = cv / bv - 1 if bv > 0 else math.nan
    if boot is None:
        low, high = _welch_log_ratio(
            b[metric].to_numpy(float), c[metric].to_numpy(float), confidence
        )
        return bv, cv, delta, low, high
    alpha = 1 - confidence
    ratio = boot[1][metric] / boot[0][metric]
    ratio = ratio[np.isfinite(ratio)]
    if not len(ratio):
        return bv, cv, delta, math.nan, math.nan
    low = float(np.quantile(ratio, alpha / 2)) - 1
    high = float(np.quantile(ratio, 1 - alpha / 2)) - 1
    return bv, cv, delta, low, high


def compare(
    baseline: RunsArg,
    candidate: RunsArg,
    limits: Limits | None = None,
    confidence: float = 0.95,
    windows: int = 20,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare candidate runs with baseline runs per op; see the module docstring for the
    statistics and verdict rules. Raises ValueError when the two sides share no op."""
    limits = limits or Limits()
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if windows < 2:
        raise ValueError(f"windows must be at least 2, not {windows}")
    base_runs, cand_runs = as_runs(baseline), as_runs(candidate)
    repeats = len(base_runs) >= 2 and len(cand_runs) >= 2
    with reuse_reductions():  # the blocks take their wall times from the summaries' rollups
        base_sum, cand_sum = op_summary(base_runs), op_summary(cand_runs)
        base_ops, cand_ops = set(base_sum["op"]), set(cand_sum["op"])
        common = sorted(base_ops & cand_ops)
        if not common:
            raise ValueError(
                f"baseline ops ({', '.join(sorted(base_ops))}) and candidate ops "
                f"({', '.join(sorted(cand_ops))}) have nothing in common"
            )
        blocks = None if repeats else (_blocks(base_runs, windows), _blocks(cand_runs, windows))
    warnings = [f"op {op!r} only in the baseline" for op in sorted(base_ops - cand_ops)]
    warnings += [f"op {op!r} only in the candidate" for op in sorted(cand_ops - base_ops)]

    if blocks is None:
        method = f"repeated runs ({len(base_runs)} baseline, {len(cand_runs)} candidate), Welch t"
        boot_base = boot_cand = None
    else:
        method = f"block bootstrap over {windows} time windows per run, {resamples} resamples"
        rng = np.random.default_rng(seed)
        blocks_base, blocks_cand = blocks
        boot_base = {op: _bootstrap(blocks_base[op], resamples, rng) for op in common}
        boot_cand = {op: _bootstrap(blocks_cand[op], resamples, rng) for op in common}

    rows = []
    for op in common:
        b = base_sum[base_sum["op"] == op]
        c = cand_sum[cand_sum["op"] == op]
        boot = None if boot_base is None or boot_cand is None else (boot_base[op], boot_cand[op])
        for metric, label, worse_up in METRICS:
            bv, cv, delta, low, high = _change(metric, b, c, confidence, boot)
            row = {
                "op": op,
                "metric": label,
                "column": metric,
                "baseline": bv,
                "candidate": cv,
                "delta": delta,
                "ci_low": low,
                "ci_high": high,
                "limit": limits.for_metric(metric),
            }
            row["verdict"] = _verdict(metric, worse_up, row, row["limit"])
            rows.append(row)
    table = pd.DataFrame(rows)
    return Comparison(
        table=table,
        method=method,
        confidence=confidence,
        baseline=tuple(r.location for r in base_runs),
        candidate=tuple(r.location for r in cand_runs),
        limits=limits,
        warnings=tuple(warnings),
    )


# --------------------------------------------------------------------------- output


def _fmt_value(metric: str, value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if metric == "throughput_rps":
        return f"{value:,.1f}/s"
    if metric == "error_rate":
        return f"{100 * value:.2f}%"
    return f"{value:.3f}ms"


def _fmt_delta(metric: str, value: float) -> str:
    if value is None or math.isnan(value):
        return "—"
    if metric == "error_rate":
        return f"{100 * value:+.2f}pp"
    return f"{100 * value:+.1f}%"


def _fmt_ci(metric: str, low: float, high: float) -> str:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "—"
    if metric == "error_rate":
        return f"cand. [{100 * low:.2f}, {100 * high:.2f}]%"
    return f"[{100 * low:+.1f}, {100 * high:+.1f}]%"


def _fmt_limit(metric: str, limit: float | None) -> str:
    if limit is None or math.isnan(limit):  # not set (pandas holds None as NaN)
        return "—"
    if metric == "throughput_rps":
        return f"-{100 * limit:g}%"
    if metric == "error_rate":
        return f"≤{100 * limit:g}%"
    return f"+{100 * limit:g}%"


def formatted_cells(row: Any) -> dict[str, str]:
    """A row of :attr:`Comparison.table` as ``compare`` shows it: baseline, candidate, delta,
    ci and limit as text (the HTML table uses the same)."""
    return {
        "baseline": _fmt_value(row.column, row.baseline).strip(),
        "candidate": _fmt_value(row.column, row.candidate).strip(),
        "delta": _fmt_delta(row.column, row.delta).strip(),
        "ci": _fmt_ci(row.column, row.ci_low, row.ci_high).strip(),
        "limit": _fmt_limit(row.column, row.limit).strip(),
    }


def format_comparison(comparison: Comparison) -> str:
    """The table printed on stdout by ``loadgen-analyze compare``."""
    lines = [
        f"baseline : {', '.join(comparison.baseline)}",
        f"candidate: {', '.join(comparison.candidate)}",
        f"CI {100 * comparison.confidence:g}%: {comparison.method}",
    ]
    lines.extend(f"warning: {w}" for w in comparison.warnings)
    header = (
        f"  {'metric':<11}{'baseline':>13}{'candidate':>13}{'Δ':>10}"
        f"  {'CI of Δ':<24}{'limit':>7}  verdict"
    )
    for op, rows in comparison.table.groupby("op", sort=False):
        lines.append("")
        lines.append(f"{op}")
        lines.append(header)
        for r in rows.itertuples(index=False):
            verdict = r.verdict.upper() if r.verdict == "fail" else r.verdict
            lines.append(
                f"  {r.metric:<11}{_fmt_value(r.column, r.baseline):>13}"
                f"{_fmt_value(r.column, r.candidate):>13}{_fmt_delta(r.column, r.delta):>10}"
                f"  {_fmt_ci(r.column, r.ci_low, r.ci_high):<24}"
                f"{_fmt_limit(r.column, r.limit):>7}  {verdict}"
            )
    lines.append("")
    if comparison.passed:
        lines.append("PASS: no limit exceeded")
    else:
        reasons, undecided = [], []
        for r in comparison.failures.itertuples(index=False):
            if r.column == "error_rate":
                change = _fmt_value(r.column, r.candidate)
            else:
                change = _fmt_delta(r.column, r.delta)
            reason = f"{r.metric} {change} beyond {_fmt_limit(r.column, r.limit)} ({r.op})"
            (undecided if r.verdict == "noisy" else reasons).append(reason)
        if reasons:
            lines.append("FAIL: " + "; ".join(reasons))
        if undecided:
            lines.append(
                "FAIL (cannot tell): "
                + "; ".join(undecided)
                + f", but the interval includes no change — rerun with more runs per side "
                f"(now {count(len(comparison.baseline), 'run')} against "
                f"{count(len(comparison.candidate), 'run')})"
            )
    return "\n".join(lines)
