"""Thresholds on runs read back, in ``loadgen run --threshold``'s language, and the one
convention for proportions.

Responsible for parsing ``METRIC[OP] CMP VALUE`` exactly as loadgen does (a latency percentile
``pN``, ``mean``/``avg``, ``max``, ``error_rate`` or ``throughput``; ``<``, ``<=``, ``>``,
``>=``; a duration, a proportion or requests per second) and judging it on the rows of a run —
above all of a sharded run's shards together, which no single shard can judge: two shards at
21.6k/s each fail ``throughput>30000/s`` while together they did 43.2k. The numbers are those
loadgen's summary defines: latency of the rows with a response, from the intended send time
under the open model, exact (the ⌈q·n⌉-th smallest); error rate = failed rows / rows;
throughput = rows / the run's wall time (start to its last request's end).

Proportions have one convention everywhere — thresholds, ``compare`` limits, notebook
parameters: ``1%`` and ``0.01`` are the same, and a bare number of 1 or more is refused with a
hint (``1`` — 100 % or 1 %?). Relative increases may exceed 100 %, written with ``%`` only.
Both languages' tests read the same vectors, ``contract/thresholds.json``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .io.engine import REPORTED_LATENCY, connect
from .io.run import Run
from .reductions.quantiles import exact_quantiles

#: The exit code of a crossed threshold (loadgen's and k6's).
EXIT_THRESHOLD = 99

_EXAMPLES = (
    "write METRIC[OP] CMP VALUE, e.g. 'p99<50ms', 'p95[get_album]<=20ms', 'error_rate<1%' or "
    "'throughput>2000/s'"
)
_DURATION_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_proportion(text: str | float) -> float:
    """A proportion: ``1%`` or ``0.01`` → 0.01. A float is taken as a fraction, below 1. A bare
    number of 1 or more is refused with a hint (``ValueError``)."""
    value = str(text).strip()
    if value.endswith("%"):
        number = _number(value[:-1])
        if number is None:
            raise ValueError(f"has '{value}', which is not a percentage >= 0%")
        return number / 100
    number = _number(value)
    if number is None:
        raise ValueError(
            f"has '{value}', which is not a proportion; write a percentage (1%) or a fraction "
            "(0.01)"
        )
    if number >= 1:
        shown = f"{number:g}"
        raise ValueError(
            f"has '{value}', a bare number of 1 or more where a proportion is expected (did you "
            f"mean {shown}%?); write a percentage ({shown}%) or a fraction below 1 "
            f"({number / 100:g})"
        )
    return number


def parse_increase(text: str | float) -> float:
    """A relative increase: as :func:`parse_proportion` (``10%`` = ``0.10``), but above 100 %
    is allowed — written with ``%`` (``150%``), never as a bare ``1.5``.

    A bare number of 1 or more is refused with the likelier reading first: a whole number
    (``10``) is a percentage someone forgot the ``%`` of — a 1000 % gate is no gate; one with
    a fraction between 1 and 10 (``1.5``) is a ratio, ``150%`` — a 1.5 % gate on a p99 is
    tighter than the noise of most runs."""
    number = _number(str(text).strip())
    if number is None or number < 1:
        return parse_proportion(text)
    as_ratio, as_percent = f"{number * 100:g}%", f"{number:g}%"
    likely, other = (
        (as_ratio, as_percent)
        if number < 10 and not number.is_integer()
        else (as_percent, as_ratio)
    )
    raise ValueError(
        f"has '{str(text).strip()}', a bare number of 1 or more where a proportion is expected "
        f"(did you mean {likely}?); write the increase as a percentage: {likely}, or {other} "
        "if that is what you meant"
    )


@dataclass(frozen=True)
class Threshold:
    """One parsed threshold; ``limit`` in ``unit``: ns, fraction or 1/s."""

    text: str
    metric: str
    op: str | None
    comparison: str
    limit: float
    unit: str

    @property
    def quantile(self) -> float | None:
        """0.99 for ``p99``; None for the other metrics."""
        return float(self.metric[1:]) / 100 if self.metric.startswith("p") else None

    def passes(self, observed: float | None) -> bool:
        if observed is None:
            return False
        return {
            "<": observed < self.limit,
            "<=": observed <= self.limit,
            ">": observed > self.limit,
            ">=": observed >= self.limit,
        }[self.comparison]


_SPLIT = re.compile(r"^(?P<left>[^<>]*)(?P<cmp><=|>=|<|>)(?P<value>.*)$", re.S)


def parse_threshold(text: str) -> Threshold:
    """``p99[get_album]<=20ms`` → its :class:`Threshold`; ``ValueError`` saying how to write
    one otherwise, in loadgen's words."""

    def bad(why: str) -> ValueError:
        return ValueError(f"threshold '{text}' {why}; {_EXAMPLES}")

    match = _SPLIT.match(text)
    if not match:
        raise bad("has no comparison (<, <=, > or >=)")
    left, comparison, value = match["left"].strip(), match["cmp"], match["value"].strip()
    name, op = left, None
    if "[" in left:
        name, _, rest = left.partition("[")
        if not rest.endswith("]"):
            raise bad("opens [ without ]")
        name, op = name.strip(), rest[:-1]
        if not op:
            raise bad("names no op inside []")
    metric, unit = _metric(name, bad)
    try:
        limit = _limit(metric, value)
        if metric == "error_rate":
            _check_reachable(comparison, limit)
    except ValueError as exc:
        raise bad(str(exc)) from None
    return Threshold(text.strip(), metric, op, comparison, limit, unit)


def _metric(name: str, bad: Any) -> tuple[str, str]:
    """The metric's canonical name (``avg`` is ``mean``, ``p99.0`` is ``p99``) and unit."""
    if name in ("mean", "avg"):
        return "mean", "ns"
    if name in ("max", "error_rate", "throughput"):
        return name, {"max": "ns", "error_rate": "fraction", "throughput": "1/s"}[name]
    if name.startswith("p"):
        q = _number(name[1:])
        if q is not None and 0 < q < 100:
            return f"p{q:g}", "ns"
        raise bad("has a percentile outside p0 < pN < p100")
    raise bad(f"measures '{name}', which is none of pN, mean, max, error_rate, throughput")


def _limit(metric: str, value: str) -> float:
    if metric == "error_rate":
        return parse_proportion(value)
    if metric == "throughput":
        number = _number(value.removesuffix("/s"))
        if number is None:
            raise ValueError(f"has '{value}', which is not a number >= 0 with a unit")
        return number
    split = next((i for i, c in enumerate(value) if c.isalpha() or c == "µ"), None)
    if split is None:
        raise ValueError(f"gives '{value}' without a unit; write e.g. 50ms")
    unit = value[split:]
    if unit not in _DURATION_UNITS:
        raise ValueError(f"has unit '{unit}'; use ns, us, ms or s")
    number = _number(value[:split])
    if number is None:
        raise ValueError(f"has '{value}', which is not a number >= 0 with a unit")
    return number * _DURATION_UNITS[unit]


def _check_reachable(comparison: str, limit: float) -> None:
    """An error-rate limit no run can cross (``<150%``, ``<=100%``, ``>=0%``) is refused."""
    never = limit > 1 or (comparison == "<=" and limit >= 1) or (comparison == ">=" and limit <= 0)
    if never:
        raise ValueError(
            "can never be crossed (an error rate is between 0% and 100%, and this limit is "
            f"{limit * 100:g}%)"
        )


@dataclass(frozen=True)
class ThresholdResult:
    """A threshold judged on a run, as run.json's ``thresholds[]``."""

    threshold: str
    op: str | None
    observed: float | None
    limit: float
    unit: str
    passed: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_ops(
    runs: Sequence[Run], ops: set[str], thresholds: Sequence[Threshold]
) -> list[Threshold]:
    """Each threshold with its selector resolved to an op label of ``ops``: a selector names an
    op by its label or by its request's name in the scenario (run.json ``request_ops``, as
    loadgen resolves it). One that names no op is bad input (ValueError listing the ops)."""
    names = {n: op for run in runs for part in run.parts for n, op in request_ops(part).items()}
    resolved = []
    for threshold in thresholds:
        op = threshold.op
        if op is not None and op not in ops:
            op = names.get(op)
            if op not in ops:
                known = sorted(ops | {f"{label} ({n})" for n, label in names.items()})
                raise ValueError(
                    f"threshold '{threshold.text}' names op '{threshold.op}', which these runs "
                    f"do not send; their ops are: {', '.join(known)}"
                )
        resolved.append(replace(threshold, op=op))
    return resolved


def request_ops(run: Run) -> dict[str, str]:
    """run.json's ``request_ops``: each request's name → its op's label ({} before schema 6)."""
    found = run.meta.get("request_ops")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def judge(run: Run, thresholds: Sequence[Threshold]) -> list[ThresholdResult]:
    """Each threshold judged on ``run`` (a merged sharded run: all its shards' rows)."""
    con = connect([run])
    wall_ns = con.execute(
        "SELECT max(start_ns + latency_ns - judged_from_ns) FROM records"
    ).fetchone()[0]
    results = []
    for threshold in thresholds:
        observed = _observe(con, threshold, wall_ns)
        results.append(
            ThresholdResult(
                threshold.text,
                threshold.op,
                observed,
                threshold.limit,
                threshold.unit,
                threshold.passes(observed),
            )
        )
    return results


def _observe(con: Any, threshold: Threshold, wall_ns: int | None) -> float | None:
    """What the run did on the threshold's metric; None when nothing was measured."""
    op = f"op = {_sql_text(threshold.op)}" if threshold.op else "true"
    if threshold.metric in ("error_rate", "throughput"):
        requests, failed = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE error IS NOT NULL) FROM records WHERE {op}"
        ).fetchone()
        if threshold.metric == "throughput":
            return requests / (wall_ns / 1e9) if wall_ns else 0.0
        return failed / requests if requests else None
    # Latency of rows with a response, as every table reports it: from the intended send time
    # under the open model (one definition, the records view's).
    relation = (
        f"(SELECT 1 AS g, {REPORTED_LATENCY} AS latency FROM records WHERE status > 0 AND {op})"
    )
    if threshold.quantile is None:
        function = "avg" if threshold.metric == "mean" else "max"
        value = con.execute(f"SELECT {function}(latency) FROM {relation}").fetchone()[0]
        return None if value is None else float(value)
    frame = exact_quantiles(con, relation, ["g"], "latency", [threshold.quantile])
    return float(frame["q"].iloc[0][0]) if len(frame) else None


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def console_block(label: str, results: Sequence[ThresholdResult]) -> str:
    """The Thresholds lines of one run: all passed, or which were crossed and what was
    observed (loadgen's console words)."""
    crossed = [r for r in results if not r.passed]
    lines = [f"thresholds — {label}"]
    for r in results:
        mark = "passed " if r.passed else "CROSSED"
        lines.append(f"  {mark}  {r.threshold}  (observed {_shown(r)})")
    if crossed:
        lines.append(f"  {len(crossed)} of {len(results)} CROSSED (exit code {EXIT_THRESHOLD})")
    else:
        lines.append(f"  all {len(results)} passed")
    return "\n".join(lines)


def _shown(result: ThresholdResult) -> str:
    if result.observed is None:
        return "nothing measured"
    if result.unit == "ns":
        return f"{result.observed / 1e6:.3f} ms"
    if result.unit == "fraction":
        return f"{result.observed * 100:.2f}%"
    return f"{result.observed:.1f}/s"
