"""``compare --junit FILE``: the regression gate as JUnit XML, the format CI systems display.

One ``<testsuite>`` per op and one ``<testcase>`` per metric (throughput, p50…p99.9, error
rate); a metric beyond its limit is a ``<failure>`` with the change and the limit, one within
noise or without a limit passes with what was measured. The same text as the console's
(:func:`~loadgen_analysis.regression.formatted_cells`); the verdicts are ``compare``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from ..regression import Comparison, formatted_cells


def comparison_junit(comparison: Comparison) -> str:
    """The JUnit XML document of ``comparison``."""
    table = comparison.table
    failures = int((table["verdict"] == "fail").sum())
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name={quoteattr("loadgen-analyze compare")} tests="{len(table)}" '
        f'failures="{failures}">',
    ]
    for op, rows in table.groupby("op", sort=False):
        failed = int((rows["verdict"] == "fail").sum())
        name = quoteattr(str(op))
        lines.append(f'  <testsuite name={name} tests="{len(rows)}" failures="{failed}">')
        lines.extend(_testcase(str(op), row) for row in rows.itertuples(index=False))
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def _testcase(op: str, row: Any) -> str:
    cells = formatted_cells(row)
    summary = (
        f"{row.metric}: baseline {cells['baseline']}, candidate {cells['candidate']}, "
        f"Δ {cells['delta']} (CI {cells['ci']}), limit {cells['limit']}"
    )
    classname = quoteattr(f"compare.{op}")
    head = f"    <testcase classname={classname} name={quoteattr(row.metric)}>"
    if row.verdict == "fail":
        message = quoteattr(f"{summary}: beyond the limit")
        return f'{head}<failure message={message} type="regression"/></testcase>'
    return f"{head}<system-out>{_text(f'{summary}: {row.verdict}')}</system-out></testcase>"


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_comparison_junit(comparison: Comparison, path: str | Path) -> Path:
    """Write :func:`comparison_junit` to ``path`` (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(comparison_junit(comparison), encoding="utf-8")
    return path
