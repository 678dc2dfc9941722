"""Response checks: how many rows failed each check, per run and op, and how many requests
were skipped because a value they use was not extracted.

A scenario's ``check`` and ``extract`` rules (docs/scenarios.md, "Checks and
chaining") make a response with an expected status a failure of error class ``check`` when
one of them fails; the row's ``check`` column (request schema 3) names the first that failed.
Failures are counted from the rows, in DuckDB, so they hold at any run size. Skipped requests
are never sent and so are not rows: they come from run.json (``summary.ops[].skipped``). Runs
recorded before schema 3 have neither and give empty frames. :func:`checks_text` is both as
the block ``loadgen-analyze summary`` prints.
"""

from __future__ import annotations

import pandas as pd

from ..io.engine import connect
from ..io.load import RunsArg, as_runs

_FAILURE_COLUMNS = ["run", "op", "check", "failed", "share"]


def check_failures(runs: RunsArg) -> pd.DataFrame:
    """Per run, op and check name: rows that failed it, and their share of the op's rows.

    Columns: run, op, check, failed, share. Check names the run declares (run.json
    ``summary.checks``) that never failed are listed with ``failed`` 0 and op ``None``.
    """
    runs = as_runs(runs)
    con = connect(runs)
    columns = set(con.execute("DESCRIBE records").df()["column_name"])
    frames = []
    if "check" in columns:
        frames.append(
            con.execute(
                """
                WITH per_op AS (
                    SELECT run_index, op_name, count(*) AS n FROM records GROUP BY ALL
                )
                SELECT any_value(r.run) AS run, r.op_name AS op,
                    CAST(r."check" AS VARCHAR) AS "check", count(*) AS failed,
                    count(*) / any_value(p.n) AS share, r.run_index
                FROM records r JOIN per_op p USING (run_index, op_name)
                WHERE r."check" IS NOT NULL
                GROUP BY r.run_index, r.op_name, r."check"
                """
            ).df()
        )
    failed = pd.concat(frames) if frames else pd.DataFrame(columns=[*_FAILURE_COLUMNS, "run_index"])
    passed = []
    for index, run in enumerate(runs):
        declared = (run.summary or {}).get("checks") or {}
        seen = set(failed.loc[failed["run_index"] == index, "check"])
        passed += [
            {
                "run": run.label,
                "op": None,
                "check": name,
                "failed": 0,
                "share": 0.0,
                "run_index": index,
            }
            for name in declared
            if name not in seen
        ]
    table = pd.concat([failed, pd.DataFrame(passed, columns=failed.columns)], ignore_index=True)
    table = table.sort_values(["run_index", "failed", "check"], ascending=[True, False, True])
    return table[_FAILURE_COLUMNS].reset_index(drop=True)


def checks_evaluated(runs: RunsArg) -> int:
    """Rows on which checks were evaluated: those whose response had an expected status
    (run.json ``summary.checks_evaluated``; for older runs the rows without an error or with a
    failed check). 0 means no check ran — say "not evaluated", never "passed"."""
    runs = as_runs(runs)
    counts = [(run.summary or {}).get("checks_evaluated") for run in runs]
    if all(isinstance(c, int) for c in counts):
        return sum(counts)
    con = connect(runs)
    (evaluated,) = con.execute(
        "SELECT count(*) FROM records WHERE error IS NULL OR error_class = 'check'"
    ).fetchone()
    return int(evaluated)


def skipped_requests(runs: RunsArg) -> pd.DataFrame:
    """Per run and op: requests not sent because a value they use was not extracted.

    Columns: run, op, skipped (ops with none are left out).
    """
    rows = []
    for run in as_runs(runs):
        for op in (run.summary or {}).get("ops") or []:
            if op.get("skipped"):
                rows.append({"run": run.label, "op": op["op"], "skipped": int(op["skipped"])})
    return pd.DataFrame(rows, columns=["run", "op", "skipped"])


def checks_text(runs: RunsArg) -> str:
    """The console block of ``loadgen-analyze summary``: failed checks per run, op and check,
    and skipped requests; empty without checks."""
    blocks = []
    failures = check_failures(runs)
    if not failures.empty:
        table = failures.to_string(index=False, float_format=lambda v: f"{v:.3f}")
        if not failures["failed"].any() and not checks_evaluated(runs):
            table += "\nnot evaluated: no response had an expected status, so no check ran"
        blocks.append("checks\n" + table)
    skipped = skipped_requests(runs)
    if not skipped.empty:
        blocks.append(
            "skipped (a value they use was not extracted)\n" + skipped.to_string(index=False)
        )
    return "\n\n".join(blocks)
