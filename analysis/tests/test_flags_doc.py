"""docs/reference/flags.md and every ``--help`` name the same flags (issue 39), both ways: a
flag a command's ``--help`` shows but the page does not document fails, and so does a flag the
page documents that the command does not take — for every command and subcommand of
``loadgen``, ``loadgen-server`` and ``loadgen-analyze``.

The page has a section per command (a heading naming it in backticks, e.g. ``## Flags of
`loadgen calibrate` ``); its flags are the backticked ones in the first column of the
section's tables. ``loadgen run``'s groups (the headings of its ``--help``: "Target and
transport", "Shards", …) are documented once, in its section: a workflow command's flags under
one of those headings must be that group's flags in ``loadgen run --help``, and its own flags
(its own heading, or "Options") are in its own section. Help strings print no literal ``%%``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Binaries

FLAGS_MD = Path(__file__).resolve().parents[2] / "docs" / "reference" / "flags.md"

#: A flag line of clap's and argparse's help: two or six spaces, then the flag.
_FLAG_LINE = re.compile(r"^(?: {2}| {6})(-\S.*)$")
#: A flag in a help line or a table cell: at the start, or after ", " or "/ ".
_FLAG = re.compile(r"(?:^|, |/ ?)(--?[A-Za-z0-9][A-Za-z0-9-]*)")
#: Flags every command has and the page does not repeat.
_IMPLICIT = {"-h", "--help", "-V", "--version"}
#: Headings of a help that are not flag groups.
_NOT_GROUPS = {"Options", "Arguments", "Commands", "Examples", "positional arguments"}

Command = tuple[str, ...]


def _help(binaries: Binaries, command: Command) -> str:
    program = {
        "loadgen": [str(binaries.loadgen)],
        "loadgen-server": [str(binaries.server)],
        "loadgen-analyze": [sys.executable, "-m", "loadgen_analysis.cli"],
    }[command[0]]
    proc = subprocess.run(
        [*program, *command[1:], "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"{' '.join(command)} --help: {proc.stderr}"
    return proc.stdout


def _groups(help_text: str) -> dict[str, set[str]]:
    """The flags of a help, by the heading they are under (``Options`` for argparse's)."""
    groups: dict[str, set[str]] = {}
    heading = "Options"
    for line in help_text.splitlines():
        if re.fullmatch(r"[A-Za-z][A-Za-z ]*:", line):
            heading = line[:-1].replace("options", "Options")
            continue
        match = _FLAG_LINE.match(line)
        if match and heading != "Examples":  # an example's continued command line is no flag
            names = match.group(1).split("  ")[0]  # the description starts after 2 spaces
            flags = {m.group(1) for part in names.split(", ") for m in [_FLAG.match(part)] if m}
            groups.setdefault(heading, set()).update(flags - _IMPLICIT)
    return groups


def _subcommands(help_text: str) -> list[str]:
    """clap's ``Commands:`` section (but ``help``), or argparse's ``{a,b,c}``."""
    if "\nCommands:\n" in help_text:
        section = help_text.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
        names = re.findall(r"^  ([a-z][a-z0-9-]*)\s", section, re.M)
        return [n for n in names if n != "help"]
    choices = re.search(r"^  \{([a-z,-]+)\}$", help_text, re.M)
    return choices.group(1).split(",") if choices else []


def _commands(binaries: Binaries) -> dict[Command, str]:
    """Every command and subcommand of the three programs, with its ``--help``."""
    found: dict[Command, str] = {}
    todo: list[Command] = [("loadgen",), ("loadgen-server",), ("loadgen-analyze",)]
    while todo:
        command = todo.pop(0)
        found[command] = _help(binaries, command)
        todo.extend((*command, sub) for sub in _subcommands(found[command]))
    return found


def _documented(markdown: str) -> dict[Command, set[str]]:
    """The page's flags by the command of the section they are in."""
    sections: dict[Command, set[str]] = {}
    current: set[str] | None = None
    for line in markdown.splitlines():
        if line.startswith("#"):
            named = re.search(r"`(loadgen[^`]*)`", line)
            if named:
                words = named.group(1).split()
                command = tuple(w for w in words if re.fullmatch(r"[a-z][a-z0-9-]*", w))
                current = sections.setdefault(command, set())
            continue
        if current is not None and line.startswith("|"):
            first_cell = re.split(r"(?<!\\)\|", line)[1]
            for span in re.findall(r"`([^`]+)`", first_cell):
                current.update(m.group(1) for m in _FLAG.finditer(span))
    return sections


@pytest.fixture(scope="module")
def commands(binaries: Binaries) -> dict[Command, str]:
    return _commands(binaries)


def test_every_commands_help_and_the_flags_page_name_the_same_flags(
    commands: dict[Command, str],
) -> None:
    documented = _documented(FLAGS_MD.read_text())
    run_groups = _groups(commands[("loadgen", "run")])
    shared = set(run_groups) - _NOT_GROUPS
    problems = []
    for command, help_text in commands.items():
        name = " ".join(command)
        own: set[str] = set()
        for heading, flags in _groups(help_text).items():
            if command[0] == "loadgen" and command != ("loadgen", "run") and heading in shared:
                # A group of loadgen run's, documented in its section: the same flags.
                problems += [
                    f"{name}: {flag} is under {heading!r}, not a flag of that group"
                    for flag in sorted(flags - run_groups[heading])
                ]
            else:
                own |= flags
        doc = documented.get(command, set())
        problems += [f"{name}: {f} is in --help, not in flags.md" for f in sorted(own - doc)]
        problems += [f"{name}: {f} is in flags.md, not in --help" for f in sorted(doc - own)]
    unknown = set(documented) - set(commands)
    problems += [f"flags.md documents {' '.join(c)!r}, not a command" for c in sorted(unknown)]
    assert not problems, "\n".join(problems)


def test_no_help_prints_a_literal_double_percent(commands: dict[Command, str]) -> None:
    doubled = [" ".join(c) for c, text in commands.items() if "%%" in text]
    assert not doubled, f"a literal %% in the --help of {doubled}"


def test_the_parsers_find_what_they_should(commands: dict[Command, str]) -> None:
    # The test is only as good as its parsers: they see known flags, groups and sections.
    assert ("loadgen-analyze", "history", "check") in commands
    assert ("loadgen", "scenarios", "show") in commands
    run_groups = _groups(commands[("loadgen", "run")])
    assert {"--url", "-s", "--scenario"} <= run_groups["Target and transport"]
    assert "--follow-redirects" in run_groups["Target and transport"]
    # calibrate's -n is its own (R(1)'s), under its own heading, not run's or the Shards'.
    calibrate = _groups(commands[("loadgen", "calibrate")])
    assert {"-n", "--requests"} <= calibrate["Calibration"]
    assert "-n" not in calibrate["Shards"]
    assert {"-o", "--out", "--plots"} <= _groups(commands[("loadgen-analyze", "report")])["Options"]
    documented = _documented(FLAGS_MD.read_text())
    assert {"--stall-every", "--stall-for"} <= documented[("loadgen-server",)]
    assert "--max-p90-increase" in documented[("loadgen-analyze", "compare")]
