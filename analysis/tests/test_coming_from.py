"""docs/coming-from.md (issue 49) held to ``loadgen run --help``: every flag its tables give in
the "in loadgen" column is one ``loadgen run`` takes (or the command the cell names), and the
page maps the habits a user of wrk, oha, vegeta and k6 brings (the URL as the argument,
-c/-d/-n, a rate, headers, method, body, vegeta's targets on stdin, thresholds, JSON output).
Its commands run in test_doc_commands.py, as every page's do."""

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


def _loadgen_column(markdown: str) -> list[tuple[str, dict[tuple[str, ...], set[str]]]]:
    """Each table row's "in loadgen" cell (the column under that header) and its flags, by the
    command they are given to: a span that starts with ``loadgen SUB`` or ``loadgen-analyze
    SUB`` names it, a bare flag goes to the command named before it in the cell, else to
    ``loadgen run``."""
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
        command: tuple[str, ...] = ("loadgen", "run")
        flags: dict[tuple[str, ...], set[str]] = {}
        for span in re.findall(r"`([^`]+)`", cells[column]):
            words = span.split()
            if words[0] in ("loadgen", "loadgen-analyze") and len(words) > 1:
                command = tuple(w for w in words[:3] if re.fullmatch(r"[a-z][a-z-]*", w))
            flags.setdefault(command, set()).update(m.group(1) for m in _FLAG.finditer(span))
        rows.append((cells[column], flags))
    return rows


def _named(rows: list) -> set[str]:
    return {flag for _, by in rows for flags in by.values() for flag in flags}


def test_every_loadgen_flag_the_page_names_is_in_its_commands_help(binaries: Binaries) -> None:
    rows = _loadgen_column(PAGE.read_text())
    assert len(rows) >= 20, rows  # the parser found the tables
    helps: dict[tuple[str, ...], set[str]] = {}
    unknown = []
    for cell, by_command in rows:
        for command, flags in by_command.items():
            if command not in helps:
                helps[command] = set().union(*_groups(_help(binaries, command)).values())
            unknown += [
                f"{' '.join(command)} {flag} (in {cell!r})" for flag in flags - helps[command]
            ]
    assert ("loadgen", "run") in helps and ("loadgen-analyze", "export") in helps, helps.keys()
    assert not unknown, "docs/coming-from.md names flags its commands do not take:\n" + "\n".join(
        unknown
    )


def test_the_page_maps_the_habits_of_the_other_tools() -> None:
    text = PAGE.read_text()
    named = _named(_loadgen_column(text))
    assert named >= HABITS, f"not mapped: {sorted(HABITS - named)}"
    for words in ("URL` as the argument", "--targets -", "wrk", "oha", "vegeta", "k6"):
        assert words in text, words
    # The URL as the argument is also what the page's commands do.
    assert re.search(r"^loadgen run http://127\.0\.0\.1:8080/", text, re.M)


def test_the_parser_sees_a_flag_that_is_not_loadgens() -> None:
    table = (
        "| you | in loadgen |\n| --- | --- |\n| x | `-Z 3`, `loadgen-analyze export R --nope` |\n"
    )
    ((_, flags),) = _loadgen_column(table)
    assert flags == {("loadgen", "run"): {"-Z"}, ("loadgen-analyze", "export"): {"--nope"}}


def test_the_page_maps_locust_and_the_live_pages() -> None:
    """Issue 61: Locust's users, spawn rate, locustfile and web UI, and k6's web dashboard."""
    rows = {
        line.split("|")[1].strip(): line for line in PAGE.read_text().splitlines() if "|" in line
    }
    for habit, flag in {
        "`-u N` (users)": "`-c N`",
        "`-r R` (spawn rate)": "`--ramp",
        "`locustfile.py` (tasks)": "scenario file",
        "web UI (:8089)": "`--dashboard`",
        "`K6_WEB_DASHBOARD=true` (web dashboard)": "`--dashboard`",
    }.items():
        assert habit in rows and flag in rows[habit], habit
