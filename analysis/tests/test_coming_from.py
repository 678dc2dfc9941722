"""docs/coming-from.md (issue 49) held to ``loadgen run --help``: every flag its tables give in
the "in loadgen" column is one ``loadgen run`` takes, and the page maps the habits a user of
wrk, oha, vegeta and k6 brings (the URL as the argument, -c/-d/-n, a rate, headers, method,
body, vegeta's targets on stdin, thresholds, JSON output). Its commands run in
test_doc_commands.py, as every page's do."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import Binaries
from .test_flags_doc import _groups, _help

PAGE = Path(__file__).resolve().parents[2] / "docs" / "coming-from.md"

#: A flag inside a code span: at its start or after a space, a comma or a slash.
_FLAG = re.compile(r"(?:^|[\s,/])(--?[A-Za-z][A-Za-z0-9-]*)")

#: What a user of the other tools reaches for first; the page must map each.
HABITS = {"-c", "-d", "-n", "--rate", "-H", "-m", "-b", "--targets", "--threshold", "--json", "-o"}


def _loadgen_column(markdown: str) -> list[tuple[str, set[str]]]:
    """Each table row's "in loadgen" cell (the column under that header) and its flags."""
    rows, column = [], None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if "in loadgen" in cells:
            column = cells.index("in loadgen")
            continue
        if column is None or set(cells[0]) <= {"-", " "}:
            continue
        spans = re.findall(r"`([^`]+)`", cells[column])
        rows.append((cells[column], {m.group(1) for s in spans for m in _FLAG.finditer(s)}))
    return rows


def test_every_loadgen_flag_the_page_names_is_in_run_help(binaries: Binaries) -> None:
    taken = set().union(*_groups(_help(binaries, ("loadgen", "run"))).values())
    rows = _loadgen_column(PAGE.read_text())
    assert len(rows) >= 20, rows  # the parser found the tables
    unknown = [f"{flag} (in {cell!r})" for cell, flags in rows for flag in flags - taken]
    assert not unknown, "docs/coming-from.md names flags loadgen run does not take:\n" + "\n".join(
        unknown
    )


def test_the_page_maps_the_habits_of_the_other_tools() -> None:
    text = PAGE.read_text()
    named = set().union(*(flags for _, flags in _loadgen_column(text)))
    assert named >= HABITS, f"not mapped: {sorted(HABITS - named)}"
    for words in ("URL` as the argument", "--targets -", "wrk", "oha", "vegeta", "k6"):
        assert words in text, words
    # The URL as the argument is also what the page's commands do.
    assert re.search(r"^loadgen run http://127\.0\.0\.1:8080/", text, re.M)


def test_the_parser_sees_a_flag_that_is_not_loadgens() -> None:
    rows = _loadgen_column("| you | in loadgen |\n| --- | --- |\n| x | `-Z 3`, `--nope` |\n")
    assert rows == [("`-Z 3`, `--nope`", {"-Z", "--nope"})]
