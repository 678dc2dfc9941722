"""Output paths never land on a run: before a command writes anything, every output it was
given (``report -o`` and ``--plots``, ``compare --html`` and ``--junit``, ``notebook -o``) is
compared with the RUNs it reads. An output that is one of them or lies inside one — a run
directory, or a folder of runs with its own ``sweep.json`` or ``capacity.json`` — would
overwrite what it analyses, so it is refused; so is one path named for two outputs. Paths are
compared as the system resolves them (symbolic links and ``..`` followed). ``s3://`` RUNs are
not local files. loadgen's ``--junit`` and ``--out`` follow the same rule
(``loadgen/src/output_guard.rs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path


def refuse_outputs_on_runs(outputs: Mapping[str, Path | None], runs: Iterable[str | Path]) -> None:
    """Raise :class:`ValueError` (one sentence naming both paths and the fix) when an output
    (by flag, e.g. ``{"-o": Path("r.html")}``; None: not given) is a RUN, lies inside one, or
    names the same path as another output."""
    local_runs = [(Path(r), Path(r).resolve()) for r in runs if str(r)[:5].lower() != "s3://"]
    seen: dict[Path, str] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        real = path.resolve()
        if real in seen:
            raise ValueError(f"{seen[real]} and {flag} both name {path}; give each its own path")
        seen[real] = flag
        for run, run_real in local_runs:
            if real == run_real or run_real in real.parents:
                where = "is" if real == run_real else "is inside"
                raise ValueError(
                    f"{flag} {path} {where} {run}, which this command reads, and writing it "
                    f"would overwrite that run's files; give {flag} a path outside {run}"
                )
