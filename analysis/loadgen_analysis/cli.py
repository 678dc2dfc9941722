"""``loadgen-analyze``: the command line of the analysis package.

Responsible for parsing arguments, calling the package and choosing the exit code — nothing
else. Subcommands: ``summary`` (per-op tables), ``explain`` (where throughput stopped: the
verdict and its evidence), ``compare`` (the regression gate: exit 0 pass, 1 a limit exceeded,
2 bad input); ``report`` (self-contained HTML), ``export`` and ``history`` in their own
modules. Bad input is one line on stderr and exit 2. Every RUN is a run directory, a folder
of them, or an ``s3://`` URL of either; warnings (an incomplete sharded run) go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import cli_history, cli_report
from .errors import RunLoadError, check_writable, os_error_text
from .export.command import add_export_parser, export
from .io.load import load_runs
from .io.outputs import refuse_outputs_on_runs
from .io.run import Run
from .jsonable import jsonable
from .report.shards import shards_text
from .thresholds import (
    EXIT_THRESHOLD,
    Threshold,
    console_block,
    judge,
    parse_increase,
    parse_proportion,
    parse_threshold,
    resolve_ops,
)

#: One exit-code table for loadgen and loadgen-analyze (docs/troubleshooting.md).
EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2


def _limit_parser(kind: str) -> Callable[[str], float | None]:
    """An argparse type for a ``compare`` limit in the one proportion convention (``10%`` =
    ``0.10``; a bare number of 1 or more refused with a hint): ``increase`` limits may exceed
    100 % (written with %), ``proportion`` ones may not; ``off``/``none`` → None (no limit)."""

    def parse(text: str) -> float | None:
        if text.strip().lower() in ("off", "none"):
            return None
        try:
            value = parse_increase(text) if kind == "increase" else parse_proportion(text)
        except ValueError as exc:
            reason = str(exc).removeprefix("has ")
            raise argparse.ArgumentTypeError(f"{reason} (or 'off' for no limit)") from None
        if kind == "proportion" and value > 1:
            raise argparse.ArgumentTypeError(f"'{text}' is above 100%")
        return value

    return parse


def _as_percent(value: float | None) -> str | None:
    """A parsed limit as the percentage text Limits reads (1.5 → ``"150%"``)."""
    return None if value is None else f"{value * 100:.12g}%"


def _threshold_arg(text: str) -> Threshold:
    """argparse type of ``--threshold``: the message is loadgen's, not argparse's."""
    try:
        return parse_threshold(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_RUN_HELP = (
    "run directory, a folder of them (a sweep, or the shard directories of one sharded run), "
    "or an s3://BUCKET/PREFIX of either"
)


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line on stderr (not the usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="loadgen-analyze",
        description="Analyse loadgen run directories: summaries, HTML reports with Little's "
        "Law, USL and bottleneck attribution, and a regression gate for CI.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_summary(sub)
    _add_explain(sub)
    cli_report.add_parser(sub, _RUN_HELP)
    _add_compare(sub)
    _add_notebook(sub)
    add_export_parser(sub)
    cli_history.add_parser(sub)
    sub.add_parser(
        "glossary",
        help="print the glossary: the words of the reports and explain",
        description="Print the glossary (docs/glossary.md, shipped with the package): closed "
        "and open model, latency from intended send, USL, bounds, knee, N_eff and the rest.",
    )
    return parser


def _glossary(args: argparse.Namespace) -> int:
    from importlib.resources import files

    print((files(__package__) / "glossary.md").read_text(encoding="utf-8"), end="")
    return EXIT_OK


def _add_notebook(sub: Any) -> None:
    from .notebook import NOTEBOOKS

    runs = "; ".join(f"{spec.name[:2]} {spec.usage()}" for spec in NOTEBOOKS)
    notebook = sub.add_parser(
        "notebook",
        help="run one of the notebooks headless against any run",
        description="Execute a notebook of the package (01-run-overview, 02-littles-law, "
        "03-bottleneck-attribution, 04-regression; by name or number) against the given runs "
        "with papermill, from any directory, into an executed notebook (.ipynb) or a page "
        f"(.html). RUNs fill the notebook's parameters in order: {runs} (run directories, "
        "folders of runs or repeats, a capacity folder, a history store). A bracketed one may "
        "be left out: 03 then uses the run the package ships, 02 and 04 skip its section and "
        "say so. Needs papermill: pip install './[notebooks]'.",
    )
    notebook.add_argument("name", metavar="NAME")
    notebook.add_argument("runs", nargs="+", metavar="RUN")
    notebook.add_argument(
        "-o", "--out", type=Path, default=None, help="output .ipynb or .html (default NAME.html)"
    )


def _add_summary(sub: Any) -> None:
    summary = sub.add_parser(
        "summary",
        help="print the per-op summary of runs; --threshold judges them (exit 99 when crossed)",
        description="Print the per-op summary of runs. With --threshold, judge each run — a "
        "sharded run's shards together, the judgement to gate a sharded test on — in loadgen's "
        "threshold language. Exit codes: 0 ok, 2 bad input, 99 a threshold crossed.",
    )
    summary.add_argument("runs", nargs="+", metavar="RUN", help=_RUN_HELP)
    scripts = summary.add_mutually_exclusive_group()
    scripts.add_argument(
        "--json", action="store_true", help="print JSON (every column) instead of the table"
    )
    scripts.add_argument(
        "--csv", action="store_true", help="print CSV (every column) instead of the table"
    )
    summary.add_argument(
        "--threshold",
        dest="thresholds",
        action="append",
        default=[],
        type=_threshold_arg,
        metavar="EXPR",
        help="METRIC[OP] CMP VALUE as loadgen's, e.g. 'p99<50ms', 'error_rate<1%%', "
        "'throughput>30000/s' (repeatable); exit 99 when a run crosses one",
    )


def _add_explain(sub: Any) -> None:
    explain = sub.add_parser(
        "explain",
        help="print where throughput stopped: the verdict and each check's evidence",
        description="Say where throughput stopped — errors, client, network or server — with "
        "each check's status and evidence. Several RUNs (or a sweep folder) are one sweep and "
        "get one verdict, with the capacity model (USL or operational-law bounds) that fits "
        "better. Exit 0 when a verdict was printed, 2 for bad input.",
    )
    explain.add_argument("runs", nargs="+", metavar="RUN", help=_RUN_HELP)
    shown = explain.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print one JSON object")
    shown.add_argument(
        "--markdown",
        action="store_true",
        help="print Markdown tables (for $GITHUB_STEP_SUMMARY or a pull-request comment)",
    )


def _add_compare(sub: Any) -> None:
    compare = sub.add_parser(
        "compare",
        help="regression gate: candidate vs baseline per op; exit 1 when a limit is exceeded",
        description="Compare a candidate with a baseline per op: throughput, p50/p90/p99/p99.9 "
        "and error rate with Δ%, a confidence interval and a verdict. BASELINE and CANDIDATE "
        "are run directories, folders of run directories (repeated runs), or s3:// URLs of "
        "either. Limits are proportions: 10% and 0.10 are the same; a bare number of 1 or "
        "more is refused (did you mean 10%?). Exit codes: 0 pass, 1 a limit exceeded, 2 bad "
        "input.",
    )
    compare.add_argument("baseline", metavar="BASELINE")
    compare.add_argument("candidate", metavar="CANDIDATE")
    limits = (
        ("--max-p99-increase", "increase", "10%", "largest p99 increase"),
        ("--max-throughput-drop", "proportion", "5%", "largest throughput drop"),
        ("--max-error-rate", "proportion", "1%", "largest candidate error rate"),
        ("--max-p50-increase", "increase", "off", "largest p50 increase"),
        ("--max-p90-increase", "increase", "off", "largest p90 increase"),
        ("--max-p999-increase", "increase", "off", "largest p99.9 increase"),
    )
    for flag, kind, default, what in limits:
        compare.add_argument(
            flag,
            type=_limit_parser(kind),
            default=_limit_parser(kind)(default),
            metavar="PCT",
            help=f"{what}, e.g. 10%% or 0.10 (default: {default.replace('%', '%%')})",
        )
    compare.add_argument(
        "--confidence",
        type=_limit_parser("proportion"),
        default=0.95,
        metavar="PCT",
        help="confidence of the intervals, e.g. 95%% or 0.95 (default: 95%%)",
    )
    compare.add_argument(
        "--windows",
        type=int,
        default=20,
        help="time windows per run for the block bootstrap (default 20)",
    )
    compare.add_argument("--json", action="store_true", help="print JSON instead of a table")
    compare.add_argument("--html", type=Path, metavar="FILE", help="also write an HTML report")
    compare.add_argument(
        "--plots", type=Path, metavar="DIR", help="also write its figures as SVG and PNG into DIR"
    )
    compare.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also write JUnit XML for CI: a test case per op and metric with a limit, failed "
        "beyond it (a metric without a limit is a property, not a test)",
    )
    compare.add_argument(
        "--junit-name",
        metavar="NAME",
        help="with --junit: the suites' name, NAME: op (default: CANDIDATE vs BASELINE)",
    )


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    print(f"loadgen-analyze: warning: {message}", file=sys.stderr)


def _error(message: str) -> int:
    print(f"loadgen-analyze: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _judged(runs: list[Run], frame: Any, thresholds: list[Threshold]) -> list[tuple[Run, list]]:
    """Each run with its thresholds judged (selectors resolved as loadgen does)."""
    resolved = resolve_ops(runs, set(frame["op"]), thresholds)
    return [(run, judge(run, resolved)) for run in runs]


def _summary(args: argparse.Namespace) -> int:
    from .reductions.checks import checks_text
    from .reductions.summary import op_summary
    from .report.summary_text import grpc_failures_text, summary_table

    runs = load_runs(args.runs)
    frame = op_summary(runs)
    judged = _judged(runs, frame, args.thresholds) if args.thresholds else []
    crossed = any(not r.passed for _, results in judged for r in results)
    code = EXIT_THRESHOLD if crossed else EXIT_OK
    shards, checks = shards_text(runs), checks_text(runs)
    if judged and args.json:
        doc = {
            "ops": json.loads(frame.to_json(orient="records")),
            "thresholds": [
                {
                    "run": run.label,
                    "passed": all(r.passed for r in results),
                    "results": [r.as_dict() for r in results],
                }
                for run, results in judged
            ],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    elif args.json or args.csv:
        print(frame.to_json(orient="records", indent=2) if args.json else frame.to_csv(index=False))
        for text in (shards, checks):  # stdout stays the JSON list; these are for the reader
            if text:
                print(text, file=sys.stderr)
    elif frame.empty:
        names = ", ".join(run.label for run in runs)
        print(
            f"{names}: no judged requests to summarise (the run recorded none, or every row "
            "is its warm-up's)"
        )
    else:
        print(summary_table(frame))
        if "latency_from" in frame:
            print(
                "\nlatency: open-model runs count from the intended send time (as loadgen's "
                "console and run.json); --json or --csv also give it from the actual send"
            )
        if shards:
            print("\nshards\n" + shards)
        if checks:
            print("\n" + checks)
        grpc = grpc_failures_text(runs)
        if grpc:
            print("\n" + grpc)
        for run, results in judged:
            print("\n" + console_block(run.label, results))
    return code


def _explain(args: argparse.Namespace) -> int:
    from .reductions.traces import traced_requests, traces_text
    from .verdict.attribution import attribute
    from .verdict.engine import decided

    # What the engine decided (a capacity search, a capacity level) is shown as it is.
    runs = load_runs(args.runs)
    engine = decided(args.runs[0]) if len(args.runs) == 1 else None
    result = engine or attribute(runs)
    traces = traced_requests(runs)
    if args.json:
        document = result.explain_dict(" ".join(args.runs))
        document["traces"] = jsonable(traces.to_dict(orient="records"))
        print(json.dumps(document, indent=2, ensure_ascii=False))
    elif args.markdown:
        from .report.markdown import explain_markdown

        print(explain_markdown(result.explain_dict(" ".join(args.runs)), len(traces)))
    else:
        print("\n\n".join(filter(None, (result.to_text(), traces_text(traces)))))
        print("\nterms: loadgen-analyze glossary")  # where USL, knee, N_eff, … are explained
    return EXIT_OK


def _notebook(args: argparse.Namespace) -> int:
    from . import notebook

    spec = notebook.find(args.name)
    out = args.out or Path(f"{spec.name}.html")
    refuse_outputs_on_runs({"-o": out}, args.runs)
    out = notebook.execute(spec, args.runs, out)
    print(f"wrote {out} ({spec.name} with {' '.join(args.runs)})")
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from .regression import Limits, compare
    from .report.html import build_comparison_report
    from .report.markup import figures_into, figures_text

    if args.confidence is None or not 0 < args.confidence < 1:
        return _error("--confidence must be between 0% and 100%, e.g. 95%")
    if args.windows < 2:
        return _error("--windows must be at least 2")
    if args.junit_name and not args.junit:
        return _error("--junit-name names the suites of --junit FILE: give --junit too")
    for path in (args.html, args.junit):
        if path:
            check_writable(path)
    baseline = load_runs([args.baseline])
    candidate = load_runs([args.candidate])
    # The flags are parsed already; handed on as percentages, so an increase above 100 %
    # (`--max-p99-increase 150%`, parsed to 1.5) is not refused as a bare 1.5 by Limits.
    limits = Limits(
        max_p99_increase=_as_percent(args.max_p99_increase),
        max_throughput_drop=_as_percent(args.max_throughput_drop),
        max_error_rate=_as_percent(args.max_error_rate),
        max_p50_increase=_as_percent(args.max_p50_increase),
        max_p90_increase=_as_percent(args.max_p90_increase),
        max_p999_increase=_as_percent(args.max_p999_increase),
    )
    result = compare(
        baseline, candidate, limits=limits, confidence=args.confidence, windows=args.windows
    )
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    else:
        print(result.to_text())
    if args.html or args.plots:
        with figures_into(args.plots) as written:
            page = build_comparison_report(result, baseline, candidate)
        if args.html:
            args.html.parent.mkdir(parents=True, exist_ok=True)
            args.html.write_text(page, encoding="utf-8")
        if args.plots:
            print(figures_text(written, args.plots), file=sys.stderr if args.json else sys.stdout)
    if args.junit:
        from .report.junit import write_comparison_junit

        time_s = sum(run.wall_time_s for run in candidate)
        write_comparison_junit(result, args.junit, args.junit_name, time_s)
    return result.exit_code


#: The flags that name a file or folder to write, by argparse destination.
_OUTPUTS = {"out": "-o", "plots": "--plots", "html": "--html", "junit": "--junit"}


def _read(args: argparse.Namespace) -> list[str]:
    """What a command reads, which no output may land on: its RUNs (``export``'s one,
    ``compare``'s two) and a history ``--store``."""
    read = [*(getattr(args, "runs", None) or [])]
    read += [getattr(args, name, None) for name in ("run", "baseline", "candidate", "store")]
    return [str(path) for path in read if path is not None]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (also used by the console script)."""
    args = _parser().parse_args(argv)
    handlers = {
        "summary": _summary,
        "explain": _explain,
        "report": cli_report.run,
        "compare": _compare,
        "notebook": _notebook,
        "export": export,
        "history": cli_history.run,
        "glossary": _glossary,
    }
    from .reductions.cache import reuse_reductions

    try:
        with warnings.catch_warnings(), reuse_reductions():
            warnings.simplefilter("always")
            warnings.showwarning = _show_warning
            outputs = {flag: getattr(args, dest, None) for dest, flag in _OUTPUTS.items()}
            refuse_outputs_on_runs(outputs, _read(args))
            return handlers[args.command](args)
    except (RunLoadError, ValueError) as exc:
        return _error(str(exc))
    except BrokenPipeError:
        # The reader left early (`| head`): what it wanted was printed; no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # an output (or input) path the system refuses: not a verdict
        return _error(os_error_text(exc))
    except Exception as exc:  # never a traceback and never 1, which means "limit exceeded"
        return _error(f"unexpected {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
