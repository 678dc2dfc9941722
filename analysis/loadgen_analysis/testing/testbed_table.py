"""The testbed table ``bench/testbeds.sh`` prints: every testbed — the closed model's
(:mod:`.testbeds`), the other models' (:mod:`.model_testbeds`), the server's side
(:mod:`.server_testbeds`) and the zoo of servers the project did not write
(:mod:`.zoo_testbeds`) — recorded with the binaries, judged by ``loadgen-analyze explain
--json`` (every command held to the same cause, :mod:`.agreement`) and shown as a Markdown
row (testbed | truth | verdict | evidence | measured | right?).
``python -m loadgen_analysis.testing.testbed_table``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .model_testbeds import MODEL_TESTBEDS
from .server_testbeds import SERVER_TESTBEDS
from .testbeds import TESTBEDS, Binaries, explain
from .zoo_testbeds import ZOO_TESTBEDS

ALL_TESTBEDS = (*TESTBEDS, *MODEL_TESTBEDS, *SERVER_TESTBEDS, *ZOO_TESTBEDS)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(binaries: Binaries, root: Path, out: TextIO = sys.stdout) -> bool:
    """Record and judge every testbed into ``root``; print a Markdown table row by row (testbed
    | truth | verdict | evidence | right?). True when every row that ran is right."""

    def emit(*cells: str) -> None:
        print("| " + " | ".join(map(_cell, cells)) + " |", file=out, flush=True)

    emit("testbed", "truth", "verdict", "the evidence that decided it", "measured", "right?")
    emit("---", "---", "---", "---", "---", "---")
    all_right = True
    for i, testbed in enumerate(ALL_TESTBEDS):
        reason = testbed.why_not()
        if reason:
            emit(testbed.name, testbed.truth, "—", f"skipped: {reason}", "", "—")
            continue
        try:
            recording = testbed.record(binaries, root / f"testbed-{i}")
            verdict = explain(recording)
            verdict["path"] = str(recording.path)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            all_right = False
            first = str(exc).strip().splitlines()[-1][:200]
            emit(testbed.name, testbed.truth, "failed", first, "", "no")
            continue
        right = testbed.right(verdict)
        all_right &= right
        shown = f"{verdict.get('verdict')} ({verdict.get('strength')})"
        emit(
            testbed.name,
            testbed.truth,
            shown,
            testbed.evidence(verdict),
            str(recording.facts.get("measured", "")),
            "yes" if right else "**no**",
        )
    return all_right


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadgen_analysis.testing.testbed_table",
        description="Record every testbed with the loadgen binaries ($LOADGEN_BIN, "
        "$LOADGEN_SERVER_BIN, default target/debug) and print verdict vs truth as a Markdown "
        "table. Exit 0 when every verdict is right, 1 otherwise.",
    )
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args(argv)
    binaries = Binaries.find()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return 0 if table(binaries, args.out) else 1
    with tempfile.TemporaryDirectory(prefix="loadgen-testbeds-") as root:
        return 0 if table(binaries, Path(root)) else 1


if __name__ == "__main__":
    sys.exit(main())
