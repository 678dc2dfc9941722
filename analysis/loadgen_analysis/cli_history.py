"""``loadgen-analyze history``: the run history's subcommands, parsed and run.

``add`` appends runs to a store, ``show`` prints its series and change points, ``report``
writes the trend report, ``site`` the static site of its series, ``check`` is the gate (exit 0
pass, 99 a regression beyond the limit, 2 bad input). The work is :mod:`.history`'s; this
module only parses, prints and picks the exit code, as :mod:`.cli` does for the other commands.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .history import DEFAULT_GATED, DEFAULT_MAX_PVALUE, MIN_RUNS, MIN_RUNS_AFTER
from .thresholds import parse_proportion
from .units import count

_STORE_HELP = "the history store: a folder, or s3://BUCKET/PREFIX"


def _limit(text: str) -> float:
    try:
        return parse_proportion(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("has ")) from None


def _pvalue(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a p-value between 0 and 1, e.g. 0.001")
    return value


def _add_filters(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--store", required=True, help=_STORE_HELP)
    parser.add_argument(
        "--metric",
        dest="metrics",
        action="append",
        metavar="NAME",
        help=f"a metric to {what} (repeatable): throughput_rps, p50_ms, p90_ms, p99_ms, "
        "p999_ms, error_rate, capacity_rps",
    )
    parser.add_argument(
        "--op", dest="ops", action="append", metavar="OP", help="only this op (repeatable)"
    )
    parser.add_argument(
        "--max-pvalue",
        type=_pvalue,
        default=DEFAULT_MAX_PVALUE,
        metavar="P",
        help=f"significance a change point needs (default {DEFAULT_MAX_PVALUE:g}, Otava's)",
    )
    parser.add_argument(
        "--by-host",
        action="store_true",
        help="key series by the target's whole URL, host and port included (default: by the "
        "scenario, method, path and model, so a new port is not a new series)",
    )


def add_parser(sub: Any) -> None:
    """The ``history`` command and its subcommands, on ``loadgen-analyze``'s subparsers."""
    history = sub.add_parser(
        "history",
        help="a history of runs: add runs, show series and change points, trend report, gate",
        description="Keep every run of a recurring test (one small Parquet file per run, in a "
        "folder or s3:// prefix), find change points in each series with E-divisive means "
        "(Apache Otava) and gate on the newest. See docs/ci.md.",
    )
    commands = history.add_subparsers(dest="history_command", required=True)
    add = commands.add_parser(
        "add",
        help="add runs to a store (one new file per run; CI jobs may add at once)",
        description="Add each RUN (a run directory, a folder of them, a sharded run's "
        "directories — one run — or a `loadgen capacity` directory) to the store as one new "
        "file. Labels commit, branch and build come from the CI's variables (GITHUB_SHA, "
        "CI_COMMIT_SHA, …) when set; --label adds or overrides.",
    )
    add.add_argument("runs", nargs="+", metavar="RUN")
    add.add_argument("--store", required=True, help=_STORE_HELP)
    add.add_argument(
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label of the runs, e.g. commit=abc123 or name=nightly (repeatable)",
    )
    add.add_argument(
        "--series",
        metavar="NAME",
        help="put the runs in the series NAME, whatever they tested (default: the series of "
        "their scenario, method, path and model)",
    )
    show = commands.add_parser(
        "show",
        help="print each series and its change points",
        description="Print the store's series (runs of one scenario, method and path, model, "
        "protocol and loadgen version, per op; the host and port only with --by-host), where a "
        "new series starts, and each metric's change points.",
    )
    _add_filters(show, "show")
    show.add_argument("--json", action="store_true", help="print JSON instead of tables")
    report = commands.add_parser(
        "report",
        help="write the trend report (HTML)",
        description="Write a self-contained "
        "HTML page: per metric the runs in time order, each segment's mean, the change points "
        "with their size, the newest run highlighted, and a table of the change points.",
    )
    _add_filters(report, "draw")
    report.add_argument("-o", "--out", required=True, type=Path, help="HTML file to write")
    report.add_argument("--plots", type=Path, metavar="DIR", help="also write SVG and PNG figures")
    check = commands.add_parser(
        "check",
        help="gate: exit 99 when a metric is now worse than before its regressions began",
        description="Judge the newest run's series: the change points with "
        f"{MIN_RUNS_AFTER} or more runs after them cut it into levels; exit 99 when the current "
        "level is worse than the best level before it (where the series was before its "
        "regressions began) by more than --max-regression, so a creep of small steps or a "
        "partial recovery fails; improvements are reported, not failed; a series of fewer than "
        f"{MIN_RUNS} runs is too short to judge (exit 0, said). Default metrics: "
        f"{', '.join(DEFAULT_GATED)}. Exit codes: 0 pass, 2 bad input, 99 a regression.",
    )
    _add_filters(check, "judge")
    check.add_argument(
        "--max-regression",
        type=_limit,
        default=0.05,
        metavar="PCT",
        help="the largest worsening that passes, e.g. 5%% (default 5%%)",
    )
    check.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML")
    check.add_argument("--json", action="store_true", help="print JSON instead of text")
    _add_site(commands)


def _add_site(commands: Any) -> None:
    """``history site``: its flags are the filters, ``-o DIR`` and the gate's limit."""
    site = commands.add_parser(
        "site",
        help="write the history as a static site: an index of series, a page per series",
        description="Write a folder of HTML pages: index.html lists each series (what was "
        "tested, its newest values, the gate's status), and each series has a page with its "
        "metrics over the runs, the change points, the judgement `history check` makes of it "
        "and its runs, each linked to its report when added with --label report=URL (a web "
        "URL, or a path relative to DIR). Links are relative: publish DIR as it is (GitHub "
        f"Pages, an S3 bucket). Judged metrics by default: {', '.join(DEFAULT_GATED)}.",
    )
    _add_filters(site, "draw and judge")
    site.add_argument(
        "-o", "--out", required=True, type=Path, metavar="DIR", help="the folder to write"
    )
    site.add_argument(
        "--max-regression",
        type=_limit,
        default=0.05,
        metavar="PCT",
        help="the gate's limit, as for `history check` (default 5%%)",
    )


def _metrics(args: argparse.Namespace, default: tuple[str, ...]) -> tuple[str, ...]:
    from .history.changes import ALL_METRICS

    chosen = tuple(args.metrics or default)
    unknown = [m for m in chosen if m not in ALL_METRICS]
    if unknown:
        raise ValueError(
            f"--metric {unknown[0]} is not a history metric; use one of {', '.join(ALL_METRICS)}"
        )
    return chosen


def _add(args: argparse.Namespace) -> int:
    from .history import record, store
    from .io.load import load_runs
    from .io.outputs import refuse_outputs_on_runs

    given = record.labels(dict(record.parse_label(text) for text in args.labels))
    capacities, others = record.split_capacity(args.runs)
    # Every other path at once, as the analysis reads them: the shard directories of one run
    # given one by one are one run, not one half-run each.
    runs = load_runs(others) if others else []
    if not args.store.startswith("s3://"):
        # The store is never written into a run it reads (its requests/ folder would then hold
        # a file that is not a segment).
        read = [
            *capacities,
            *(p for run in runs for p in (run.path, *(s.path for s in run.shards))),
        ]
        refuse_outputs_on_runs({"--store": Path(args.store)}, read)
    tables = [(str(path), record.capacity_rows(path, given, args.series)) for path in capacities]
    tables += [(run.location, record.run_rows(run, given, args.series)) for run in runs]
    for path in capacities:
        note = record.unconverged_note(path)
        if note:
            print(f"note: {note}")
    for source, rows in tables:
        print(f"added {source} ({count(len(rows), 'op')}) as {store.add(rows, args.store)}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from .history import changes, store

    history = store.read(args.store, args.by_host)
    points = changes.all_change_points(
        history, _metrics(args, changes.ALL_METRICS), _ops(args), args.max_pvalue
    )
    table, starts = changes.series_table(history), changes.series_starts(history)
    if args.json:
        doc = {
            "series": json.loads(table.to_json(orient="records", date_format="iso")),
            "series_starts": json.loads(starts.to_json(orient="records")),
            "change_points": [p.as_dict() for p in points],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    print("series")
    for row in table.to_dict("records"):
        print(
            f"  {row['series']}, op {row['op']}: {count(row['runs'], 'run')}, "
            f"{row['first']:%Y-%m-%d %H:%M} → {row['last']:%Y-%m-%d %H:%M} UTC "
            f"(key {row['key']}; {row['protocol']}, loadgen {row['loadgen_version']})"
        )
    for mark in starts.to_dict("records"):
        print(
            f"new series {mark['fingerprint']} from run {mark['run']}: "
            + "; ".join(mark["changed"])
        )
    print(f"\nchange points (E-divisive means, p ≤ {args.max_pvalue:g})")
    print("\n".join(f"  {p.describe()}" for p in points) or "  none")
    return 0


def _ops(args: argparse.Namespace) -> tuple[str, ...] | None:
    return tuple(args.ops) if args.ops else None


def _report(args: argparse.Namespace) -> int:
    from .history import changes, store, trend
    from .report.markup import figures_into, figures_text

    history = store.read(args.store, args.by_host)
    metrics = _metrics(args, changes.ALL_METRICS)
    with figures_into(args.plots) as written:
        out = trend.write_trend_report(history, args.out, metrics, _ops(args), args.max_pvalue)
    print(f"wrote {out} ({count(history['run_id'].nunique(), 'run')})")
    if args.plots is not None:
        print(figures_text(written, args.plots))
    return 0


def _check(args: argparse.Namespace) -> int:
    from .history import gate, store

    history = store.read(args.store, args.by_host)
    metrics = _metrics(args, DEFAULT_GATED)
    result = gate.check(history, args.max_regression, metrics, _ops(args), args.max_pvalue)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        print(result.to_text())
    if args.junit:
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        name = f"history: {Path(args.store).resolve().name}"
        args.junit.write_text(gate.gate_junit(result, name), encoding="utf-8")
    return result.exit_code


def _site(args: argparse.Namespace) -> int:
    from .errors import check_writable
    from .history import changes, site, store

    history = store.read(args.store, args.by_host)
    check_writable(args.out / "index.html")
    settings = site.SiteSettings(
        metrics=_metrics(args, changes.ALL_METRICS),
        gated=_metrics(args, DEFAULT_GATED),
        limit=args.max_regression,
        max_pvalue=args.max_pvalue,
    )
    pages = site.write_site(history, args.out, settings, _ops(args))
    runs = count(history["run_id"].nunique(), "run")
    print(f"wrote {args.out / 'index.html'} and {count(len(pages) - 1, 'series page')} ({runs})")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``history`` subcommand; returns the exit code."""
    handlers = {"add": _add, "show": _show, "report": _report, "check": _check, "site": _site}
    return handlers[args.history_command](args)
