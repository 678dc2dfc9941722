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
from ..io.run import Run

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
    try:
        if args.format == "hlog":
            count, what = _write_hlog(run, partial), "intervals"
        else:
            sys.stdout.flush()
            count, what = _write_rows(run, args.format, partial), "rows"
    except BaseException:
        if partial:
            partial.unlink(missing_ok=True)
        raise
    if partial and args.out:
        try:
            partial.replace(args.out)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
        print(f"wrote {args.out} ({count} {what} of {run.label})", file=sys.stderr)
    return 0


def _write_hlog(run: Run, partial: Path | None) -> int:
    from . import hlog

    sink = partial.open("wb") if partial else sys.stdout.buffer
    text = io.TextIOWrapper(sink, encoding="utf-8", newline="\n", write_through=True)
    try:
        return hlog.write_hlog(run, text)
    finally:
        text.flush()
        text.detach()
        if partial:
            sink.close()


def _write_rows(run: Run, form: str, partial: Path | None) -> int:
    """The rows through DuckDB's ``COPY`` to the file, or to standard output; a reader that
    left early (``| head``) is a broken pipe, as a ``print`` would see it."""
    import duckdb

    from . import rows

    try:
        return rows.write_rows(run, form, partial or rows.STDOUT)
    except duckdb.IOException as exc:
        if partial is None and "broken pipe" in str(exc).lower():
            raise BrokenPipeError(str(exc)) from exc
        raise
