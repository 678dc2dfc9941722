"""Every command says the same cause (issue 34, part 8): for a testbed's recording, the cause
the recording command printed (``loadgen … --json``: a run's ``verdict``, a capacity search's
``limited_by``), the one in the files it wrote (run.json's ``verdict``, capacity.json's
``limited_by``), ``loadgen-analyze explain``'s and ``loadgen-analyze report``'s (its verdict
box). :func:`causes` collects them; :func:`check` raises when they differ, so every testbed
that is explained is also held to one answer. :func:`check_in_process` does the same with
``explain`` and ``report`` called in this interpreter — the same commands without starting
Python twice a row, cheap enough for the quick zoo rows in CI.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: The report's verdict box: ``<div class="verdict CAUSE">``.
_VERDICT_BOX = re.compile(r"""class=["']verdict ([a-z_]+)["']""")
#: capacity.json's ``limited_by`` as a cause: ``max_rate``, nothing stopped it below its ceiling.
_LIMITED_BY = {"max_rate": "none"}


def _cause(limited_by: str | None) -> str | None:
    return _LIMITED_BY.get(limited_by or "", limited_by)


def _cli(argv: list[str]) -> str:
    """``loadgen-analyze ARGV…`` in this interpreter: what it printed; RuntimeError (with what
    it said on stderr) when it exits non-zero."""
    from ..cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"loadgen-analyze {' '.join(argv)} exited {code}:\n{err.getvalue()}")
    return out.getvalue()


def _report_cause(path: Path, in_process: bool = False) -> str | None:
    """The cause in ``loadgen-analyze report PATH``'s verdict box."""
    with tempfile.TemporaryDirectory(prefix="loadgen-agreement-") as scratch:
        out = Path(scratch) / "report.html"
        if in_process:
            _cli(["report", str(path), "-o", str(out)])
        else:
            command = [sys.executable, "-m", "loadgen_analysis.cli", "report", str(path), "-o"]
            proc = subprocess.run(
                [*command, str(out)], capture_output=True, text=True, timeout=300, check=False
            )
            if proc.returncode != 0:
                raise RuntimeError(f"report on {path} exited {proc.returncode}:\n{proc.stderr}")
        found = _VERDICT_BOX.search(out.read_text(encoding="utf-8"))
    return found.group(1) if found else None


def causes(
    path: Path,
    printed: dict[str, Any],
    explained: dict[str, Any],
    in_process: bool = False,
    report: bool = True,
) -> dict[str, Any]:
    """The cause each command gives for the recording at ``path``: ``printed`` is what the
    recording command printed with ``--json``, ``explained`` explain's ``--json`` answer."""
    out: dict[str, Any] = {"explain": explained.get("verdict")}
    if "limited_by" in printed:
        out["console"] = _cause(printed["limited_by"])
    elif isinstance(printed.get("verdict"), dict):
        out["console"] = printed["verdict"].get("cause")
    if (path / "capacity.json").is_file():
        capacity = json.loads((path / "capacity.json").read_text(encoding="utf-8"))
        out["capacity.json"] = _cause(capacity.get("limited_by"))
    elif (path / "run.json").is_file():
        verdict = json.loads((path / "run.json").read_text(encoding="utf-8")).get("verdict")
        out["run.json"] = verdict.get("cause") if isinstance(verdict, dict) else None
    if report:
        out["report"] = _report_cause(path, in_process)
    return out


def check_in_process(path: Path, printed: dict[str, Any], report: bool = True) -> dict[str, Any]:
    """:func:`check`, with ``explain --json`` and ``report`` run in this interpreter (without
    ``report``: the console, the run's files and explain — explain costs ~0.1 s of CPU, a
    report ~1.6 s)."""
    explained = json.loads(_cli(["explain", "--json", str(path)]))
    return check(path, printed, explained, in_process=True, report=report)


def check(
    path: Path,
    printed: dict[str, Any],
    explained: dict[str, Any],
    in_process: bool = False,
    report: bool = True,
) -> dict[str, Any]:
    """:func:`causes`, raising RuntimeError when any two differ (a run's console must give
    one)."""
    found = causes(path, printed, explained, in_process, report)
    single_run = (path / "run.json").is_file() and not (path / "capacity.json").is_file()
    if single_run and "console" not in found:
        raise RuntimeError(f"{path}: the run printed no verdict with --json")
    if len(set(found.values())) != 1:
        raise RuntimeError(f"{path}: the commands disagree on the cause: {found}")
    return found
