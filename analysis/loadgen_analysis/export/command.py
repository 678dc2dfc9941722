"""``loadgen-analyze export``: its arguments and its handler, kept beside the exports (the
command line itself, :mod:`loadgen_analysis.cli`, only registers them).

Writes to ``-o FILE`` through a ``.partial`` file renamed when complete, so a failed export
leaves nothing half-written; without ``-o`` to standard output, for a pipe.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from ..io.load import load_runs

FORMATS = ("csv", "jsonl", "hlog")


def add_export_parser(sub: Any) -> None:
    export = sub.add_parser(
        "export",
        help="write a run's rows as CSV or JSON lines, or its latencies as an HdrHistogram log",
        description="Export one run for tools that do not read Parquet: csv and jsonl write "
        "every request with the contract's columns (one line each, streamed in bounded "
        "memory); hlog writes an HdrHistogram interval log, one interval per second and op "
        "(tagged with the op, spaces as _), of the latency the summary reports, for "
        "HistogramLogProcessor and HdrHistogramVisualizer. Exit 0 when written, 2 for bad "
        "input.",
    )
    export.add_argument(
        "run", metavar="RUN", help="a run directory (or a sharded run's folder), or s3:// URL"
    )
    export.add_argument("--format", required=True, choices=FORMATS, help="csv, jsonl or hlog")
    export.add_argument(
        "-o", "--out", type=Path, default=None, help="file to write (default: standard output)"
    )


def export(args: argparse.Namespace) -> int:
    from . import hlog, rows

    runs = load_runs([args.run])
    if len(runs) != 1:
        names = ", ".join(r.label for r in runs[:3]) + (", …" if len(runs) > 3 else "")
        raise ValueError(
            f"{args.run} holds {len(runs)} runs ({names}); export takes one: give one of its "
            "run directories"
        )
    run = runs[0]
    if args.out is not None and args.out.is_dir():
        raise ValueError(f"-o {args.out} is a directory; give the path of a file to write")
    partial = args.out.with_name(args.out.name + ".partial") if args.out else None
    sink = partial.open("wb") if partial else sys.stdout.buffer
    try:
        if args.format == "hlog":
            text = io.TextIOWrapper(sink, encoding="utf-8", newline="\n", write_through=True)
            count, what = hlog.write_hlog(run, text), "intervals"
            text.flush()
            text.detach()
        else:
            write = rows.write_csv if args.format == "csv" else rows.write_jsonl
            count, what = write(run, sink), "rows"
    except BaseException:
        if partial:
            sink.close()
            partial.unlink(missing_ok=True)
        raise
    if partial and args.out:
        sink.close()
        try:
            partial.replace(args.out)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
        print(f"wrote {args.out} ({count} {what} of {run.label})", file=sys.stderr)
    return 0
