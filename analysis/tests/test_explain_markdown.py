"""``loadgen-analyze explain --markdown`` (issue 39): what a CI job appends to
``$GITHUB_STEP_SUMMARY`` is Markdown that renders — read back with a Markdown parser (mistune,
with GitHub's table extension), the checks are a table whose cells say exactly what
``explain --json`` says, and markup in a value (``N*``, ``X_max``, a ``|``) stays text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mistune
import pytest

from loadgen_analysis.report.markdown import explain_markdown

from .conftest import run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"
PARSE = mistune.create_markdown(renderer="ast", plugins=["table"])


def _text(node: dict[str, Any]) -> str:
    """The text a reader sees in ``node`` (a line break as a newline)."""
    if node["type"] == "inline_html":
        return "\n" if node["raw"] == "<br>" else node["raw"]
    if "raw" in node:
        return node["raw"]
    return "".join(_text(child) for child in node.get("children", []))


def _rendered(markdown: str) -> tuple[str, list[list[list[str]]], list[str]]:
    """The verdict paragraph, each table's rows of cells, and the list items."""
    nodes = PARSE(markdown)
    paragraphs = [_text(n) for n in nodes if n["type"] == "paragraph"]
    tables = []
    for table in (n for n in nodes if n["type"] == "table"):
        head, body = table["children"]
        rows = [[_text(c) for c in head["children"]]]
        rows += [[_text(c) for c in row["children"]] for row in body["children"]]
        tables.append(rows)
    items = [_text(i) for n in nodes if n["type"] == "list" for i in n["children"]]
    return paragraphs[0], tables, items


@pytest.mark.parametrize("sample", ["sweep-w8-10ms", "capacity-w8-10ms", "overview"])
def test_explain_markdown_renders_the_json_verdict_as_a_table(sample: str) -> None:
    proc = run_cli("explain", DATA / sample, "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    proc = run_cli("explain", DATA / sample, "--markdown")
    assert proc.returncode == 0, proc.stderr
    verdict, tables, notes = _rendered(proc.stdout)
    assert verdict == (
        f"Verdict: {document['verdict']} ({document['strength']}) — {document['summary']}"
    )
    checks = [[c["name"], c["status"], c["evidence"]] for c in document["checks"]]
    if checks:
        assert tables[0] == [["check", "status", "evidence"], *checks]
    # Each note once, as written.
    assert notes == list(dict.fromkeys(document["notes"]))


def test_markup_in_a_value_stays_text() -> None:
    document = {
        "run": "runs/a",
        "verdict": "server",
        "strength": "weak",
        "summary": "knee N* = 8, X_max 800/s",
        "checks": [{"name": "server", "status": "limit", "evidence": "a | b, <b>c</b>\nnext line"}],
        "notes": ["*not* a list"],
        "phases": [
            {
                "phase": "p_1",
                "verdict": "ok",
                "workers_alive": 8,
                "busy_share": 0.5,
                "waiting_share": 0.25,
            }
        ],
    }
    verdict, tables, notes = _rendered(explain_markdown(document))
    assert verdict == "Verdict: server (weak) — knee N* = 8, X_max 800/s"
    assert tables[0][1] == ["server", "limit", "a | b, <b>c</b>\nnext line"]
    assert tables[1] == [
        ["phase", "verdict", "workers alive", "busy", "waiting"],
        ["p_1", "ok", "8", "50%", "25%"],
    ]
    assert notes == ["*not* a list"]
