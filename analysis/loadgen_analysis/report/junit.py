"""``compare --junit FILE``: the regression gate as JUnit XML, the format CI systems display.

One ``<testsuite>`` per op, named ``NAME: op`` (``--junit-name``, by default ``CANDIDATE vs
BASELINE`` by their folder names, so two gates in one CI run are told apart) and timed with
the candidate run's duration; one ``<testcase>`` per metric with a limit (throughput,
p50…p99.9, error rate): beyond its limit a ``<failure>`` with the change and the limit,
within it (or within noise) a pass with what was measured. A metric without a limit is not a
test: it is a ``<property>`` of its suite, so it counts neither as passed nor failed. The same
text as the console's (:func:`~loadgen_analysis.regression.formatted_cells`); the verdicts are
``compare``'s.
"""

from __future__ import annotations

import re
from itertools import takewhile
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from ..regression import Comparison, formatted_cells

#: ``compare``'s verdict for a metric it shows but does not judge.
_NOT_JUDGED = "—"


def default_name(comparison: Comparison) -> str:
    """``candidate vs baseline``: the last part of each side's location (of repeated runs,
    of the folder they share)."""

    def last(locations: tuple[str, ...]) -> str:
        # Repeated runs (…/candidate/r1, …/candidate/r2): the folder they share.
        paths = [loc.rstrip("/").split("/") for loc in locations]
        same = takewhile(lambda parts: len(set(parts)) == 1, zip(*paths, strict=False))
        shared = [parts[0] for parts in same]
        return next((part for part in reversed(shared) if part), "?")

    return f"{last(comparison.candidate)} vs {last(comparison.baseline)}"


#: The verdicts that fail the gate: a limit exceeded, or a change the gate cannot tell from noise.
_FAILED = ("fail", "noisy")


def comparison_junit(
    comparison: Comparison, name: str | None = None, time_s: float | None = None
) -> str:
    """The JUnit XML document of ``comparison``: suites ``name: op`` (by default
    :func:`default_name`), each timed ``time_s`` (the candidate's duration) when known."""
    name = name or default_name(comparison)
    table = comparison.table
    judged = table[table["verdict"] != _NOT_JUDGED]
    failures = int(judged["verdict"].isin(_FAILED).sum())
    time = "" if time_s is None else f' time="{time_s:.3f}"'
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<testsuites name={xml_attr(name)} tests={xml_attr(str(len(judged)))} "
        f'failures="{failures}"{time}>',
    ]
    for op, rows in table.groupby("op", sort=False):
        tests = rows[rows["verdict"] != _NOT_JUDGED]
        failed = int(tests["verdict"].isin(_FAILED).sum())
        suite = xml_attr(f"{name}: {op}")
        lines.append(f'  <testsuite name={suite} tests="{len(tests)}" failures="{failed}"{time}>')
        untested = rows[rows["verdict"] == _NOT_JUDGED]
        if len(untested):
            lines.append("    <properties>")
            lines.extend(_property(row) for row in untested.itertuples(index=False))
            lines.append("    </properties>")
        lines.extend(_testcase(str(op), row) for row in tests.itertuples(index=False))
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def _summary(row: Any) -> str:
    cells = formatted_cells(row)
    return (
        f"{row.metric}: baseline {cells['baseline']}, candidate {cells['candidate']}, "
        f"Δ {cells['delta']} (CI {cells['ci']}), limit {cells['limit']}"
    )


def _property(row: Any) -> str:
    """A metric shown without a limit: measured, not judged."""
    return f"      <property name={xml_attr(row.metric)} value={xml_attr(_summary(row))}/>"


def _testcase(op: str, row: Any) -> str:
    summary = _summary(row)
    classname = xml_attr(f"compare.{op}")
    head = f"    <testcase classname={classname} name={xml_attr(row.metric)}>"
    if row.verdict == "fail":
        message = xml_attr(f"{summary}: beyond the limit")
        return f'{head}<failure message={message} type="regression"/></testcase>'
    if row.verdict == "noisy":
        message = xml_attr(
            f"{summary}: beyond the limit but within noise — cannot tell; "
            "rerun with more runs per side"
        )
        return f'{head}<failure message={message} type="undecided"/></testcase>'
    return f"{head}<system-out>{_text(f'{summary}: {row.verdict}')}</system-out></testcase>"


#: Characters XML 1.0 does not allow, even escaped: control characters but tab, LF and CR.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_safe(value: str) -> str:
    """``value`` with each character XML cannot hold (``\x01`` from a label, say) made U+FFFD,
    so the document stays valid XML whatever a run's labels or ops hold."""
    return _NOT_XML.sub("\ufffd", value)


def xml_attr(value: str) -> str:
    """``value`` quoted as an XML attribute, made :func:`xml_safe` first."""
    return quoteattr(xml_safe(value))


def _text(value: str) -> str:
    return xml_safe(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_comparison_junit(
    comparison: Comparison,
    path: str | Path,
    name: str | None = None,
    time_s: float | None = None,
) -> Path:
    """Write :func:`comparison_junit` to ``path`` (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(comparison_junit(comparison, name, time_s), encoding="utf-8")
    return path
