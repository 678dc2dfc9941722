"""loadgen_analysis — read ``loadgen`` run directories and explain them.

The package answers four questions about a load test: what throughput Little's Law predicted
and what was observed (:mod:`.littles_law`, :mod:`.usl`, :mod:`.bounds`), where the limit
is — client, network or server (:mod:`.attribution`; the client's side in :mod:`.client`) —
and whether a candidate regressed against a baseline (:mod:`.regression`). Raw records are
reduced in DuckDB (:mod:`.summary`); plots (:mod:`.plots`) and reports (:mod:`.report`) only
see the small frames that come out. Runs are read from local directories or ``s3://``
prefixes (:mod:`.io`, :mod:`.s3`); the shard directories of one sharded run are analysed as
one run.
"""

from .attribution import Attribution, Finding, Thresholds, attribute
from .bounds import BoundsFit, better_fit, fit_bounds
from .client import ClientEvidence, client_evidence
from .io import (
    IncompleteShardSetWarning,
    Run,
    RunLoadError,
    as_runs,
    connect,
    load_run,
    load_runs,
)
from .littles_law import (
    Calibration,
    calibration_from_sweep,
    littles_law_table,
    predicted_throughput,
    sweep_table,
)
from .regression import Comparison, Limits, compare
from .summary import (
    error_breakdown,
    gap_summary,
    latency_components,
    op_summary,
    percentile_spectrum,
    phase_spans,
    run_table,
    shard_table,
    timeline,
    worker_gaps,
)
from .usl import USLFit, fit_usl, usl_throughput

__all__ = [
    "Attribution",
    "BoundsFit",
    "Calibration",
    "ClientEvidence",
    "Comparison",
    "Finding",
    "IncompleteShardSetWarning",
    "Limits",
    "Run",
    "RunLoadError",
    "Thresholds",
    "USLFit",
    "as_runs",
    "attribute",
    "better_fit",
    "calibration_from_sweep",
    "client_evidence",
    "compare",
    "connect",
    "error_breakdown",
    "fit_bounds",
    "fit_usl",
    "gap_summary",
    "latency_components",
    "littles_law_table",
    "load_run",
    "load_runs",
    "op_summary",
    "percentile_spectrum",
    "phase_spans",
    "predicted_throughput",
    "run_table",
    "shard_table",
    "sweep_table",
    "timeline",
    "usl_throughput",
    "worker_gaps",
]
