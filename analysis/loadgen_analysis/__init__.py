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

import importlib

#: Where each public name lives; modules are imported on first use (PEP 562), so
#: ``loadgen-analyze summary`` does not pay for SciPy and Matplotlib.
_MODULES = {
    "Attribution": "attribution",
    "BoundsFit": "bounds",
    "Calibration": "littles_law",
    "ClientEvidence": "client",
    "Comparison": "regression",
    "Finding": "attribution",
    "IncompleteShardSetWarning": "io",
    "Limits": "regression",
    "Run": "io",
    "RunLoadError": "io",
    "Thresholds": "attribution",
    "USLFit": "usl",
    "as_runs": "io",
    "attribute": "attribution",
    "better_fit": "bounds",
    "calibration_from_sweep": "littles_law",
    "client_evidence": "client",
    "compare": "regression",
    "connect": "io",
    "error_breakdown": "summary",
    "fit_bounds": "bounds",
    "fit_usl": "usl",
    "gap_summary": "summary",
    "latency_components": "summary",
    "littles_law_table": "littles_law",
    "load_run": "io",
    "load_runs": "io",
    "op_summary": "summary",
    "percentile_spectrum": "summary",
    "phase_spans": "summary",
    "phase_table": "summary",
    "predicted_throughput": "littles_law",
    "run_table": "summary",
    "shard_table": "summary",
    "sweep_table": "littles_law",
    "timeline": "summary",
    "usl_throughput": "usl",
    "worker_gaps": "summary",
}


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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
    "phase_table",
    "predicted_throughput",
    "run_table",
    "shard_table",
    "sweep_table",
    "timeline",
    "usl_throughput",
    "worker_gaps",
]
