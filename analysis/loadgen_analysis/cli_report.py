"""``loadgen-analyze report``: the self-contained HTML report on runs (a sweep, a capacity
search) and, with ``--dashboard``, the live dashboard's page rebuilt from one run directory.
The work is :mod:`.report`'s; this module only parses, checks the flags fit together and
prints what it wrote, as :mod:`.cli` does for the other commands.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .errors import check_writable
from .io.load import load_runs
from .units import count, parse_bucket_seconds


def add_parser(sub: Any, run_help: str) -> None:
    """The ``report`` command on ``loadgen-analyze``'s subparsers (``run_help``: what a RUN
    may be, as the other commands say it)."""
    report = sub.add_parser(
        "report",
        help="write one self-contained HTML report on runs (a sweep when their -c differ)",
        description="Write a self-contained HTML report: summary tables, the attribution "
        "verdict, Little's Law and USL for several concurrency levels, and plots. A RUN "
        "that is a folder of run directories stands for all of them; a `loadgen capacity` "
        "directory gets latency vs offered rate with the SLO and the answer.",
    )
    report.add_argument("runs", nargs="+", metavar="RUN", help=run_help)
    report.add_argument("-o", "--out", required=True, type=Path, help="HTML file to write")
    report.add_argument("--title", help="report title")
    report.add_argument(
        "--plots",
        type=Path,
        metavar="DIR",
        help="also write each figure as SVG and PNG (200 dpi) into DIR, for papers and slides "
        "(also for a capacity directory)",
    )
    report.add_argument(
        "--bucket",
        type=parse_bucket_seconds,
        default=1.0,
        metavar="WIDTH",
        help="the timeline's bucket width, e.g. 100ms to see a stall shorter than a second, "
        "which one-second buckets average away (default 1s)",
    )
    report.add_argument(
        "--dashboard",
        action="store_true",
        help="write the live dashboard's page instead (what `loadgen run --dashboard-out` "
        "saves): one RUN's seconds from its rows and run.json's final figures",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``report``; returns the exit code (0: written)."""
    from .io.capacity import is_capacity_dir
    from .report.capacity import build_capacity_report
    from .report.html import write_report
    from .report.markup import figures_into, figures_text

    check_writable(args.out)
    if args.dashboard:
        return _report_dashboard(args)
    with figures_into(args.plots) as written:
        if len(args.runs) == 1 and is_capacity_dir(args.runs[0]):
            args.out.parent.mkdir(parents=True, exist_ok=True)
            text = build_capacity_report(args.runs[0], args.title)
            args.out.write_text(text, encoding="utf-8")
            print(f"wrote {args.out} (capacity search)")
        else:
            runs = load_runs(args.runs)
            out = write_report(runs, args.out, args.title, bucket_s=args.bucket)
            print(f"wrote {out} ({count(len(runs), 'run')})")
    if args.plots is not None:
        print(figures_text(written, args.plots))
    return 0


def _report_dashboard(args: argparse.Namespace) -> int:
    from .io.capacity import is_capacity_dir
    from .report.dashboard import write_dashboard

    if args.plots is not None or args.bucket != 1.0:
        raise ValueError(
            "--dashboard draws the page's own charts (per second); leave out --plots and --bucket"
        )
    runs = [] if any(is_capacity_dir(r) for r in args.runs) else load_runs(args.runs)
    if len(runs) != 1:
        what = count(len(runs), "run") if runs else "a capacity search"
        raise ValueError(
            f"--dashboard shows one run, and {' '.join(args.runs)} is {what}; "
            "give one run directory"
        )
    out = write_dashboard(runs[0], args.out, args.title)
    print(f"wrote {out} (the dashboard of {runs[0].location})")
    return 0
