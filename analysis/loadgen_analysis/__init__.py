"""loadgen_analysis — read ``loadgen`` run directories and explain them.

The package answers four questions about a load test: what throughput Little's Law predicted
and what was observed (:mod:`.models`: Little's Law, the USL, bounds), where the limit is —
client, network or server (:mod:`.verdict`) — and whether a candidate regressed against a
baseline (:mod:`.regression`). Runs are read from local directories or ``s3://`` prefixes and
checked against the file contract (:mod:`.io`); the shard directories of one sharded run are
analysed as one run. Raw records are reduced in DuckDB (:mod:`.reductions`); plots and HTML
reports (:mod:`.report`) only see the small frames that come out. Imports point one way, down
the layers of docs/architecture.md ("analysis"). :mod:`.testing` (test and bench helpers) is
not part of the installed package.
"""

import importlib

#: Where each public name lives; modules are imported on first use (PEP 562), so
#: ``loadgen-analyze summary`` does not pay for SciPy and Matplotlib.
_MODULES = {
    "Attribution": "verdict.attribution",
    "BoundsFit": "models.bounds",
    "Calibration": "models.littles_law",
    "ClientEvidence": "verdict.client_evidence",
    "Comparison": "regression",
    "Finding": "verdict.findings",
    "IncompleteShardSetWarning": "io.shards",
    "Limits": "regression",
    "RateSweep": "models.rate_sweep",
    "Run": "io.run",
    "RunLoadError": "errors",
    "Thresholds": "verdict.findings",
    "USLFit": "models.usl",
    "as_runs": "io.load",
    "attribute": "verdict.attribution",
    "better_fit": "models.bounds",
    "calibration_from_sweep": "models.littles_law",
    "client_evidence": "verdict.client_evidence",
    "compare": "regression",
    "connect": "io.engine",
    "error_breakdown": "reductions.summary",
    "fit_bounds": "models.bounds",
    "fit_usl": "models.usl",
    "gap_summary": "reductions.gap_tables",
    "is_rate_sweep": "models.rate_sweep",
    "latency_components": "reductions.summary",
    "littles_law_table": "models.littles_law",
    "load_run": "io.load",
    "load_runs": "io.load",
    "not_identifiable": "models.identify",
    "op_summary": "reductions.summary",
    "open_model_table": "reductions.open_model",
    "percentile_spectrum": "reductions.percentiles",
    "phase_spans": "reductions.timeline",
    "phase_table": "reductions.timeline",
    "predicted_throughput": "models.littles_law",
    "rate_sweep": "models.rate_sweep",
    "rate_sweep_table": "models.rate_sweep",
    "run_table": "reductions.summary",
    "scrape_failures": "io.server_metrics",
    "server_cpu_busy": "reductions.server_series",
    "server_metrics": "io.server_metrics",
    "server_saturation": "reductions.server_series",
    "shard_table": "reductions.summary",
    "sweep_table": "models.littles_law",
    "timeline": "reductions.timeline",
    "usl_throughput": "models.usl",
    "worker_gaps": "reductions.gap_tables",
}


#: Modules reachable as attributes of the package, as the docs use them
#: (``loadgen_analysis.contract.columns(…)``, ``from loadgen_analysis import plots``).
_SUBMODULES = {
    "checks": "reductions.checks",
    "contract": "io.contract",
    "plots": "report.plots",
}


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        submodule = importlib.import_module(f".{_SUBMODULES[name]}", __name__)
        globals()[name] = submodule
        return submodule
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
    "RateSweep",
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
    "is_rate_sweep",
    "latency_components",
    "littles_law_table",
    "load_run",
    "load_runs",
    "not_identifiable",
    "op_summary",
    "open_model_table",
    "percentile_spectrum",
    "phase_spans",
    "phase_table",
    "predicted_throughput",
    "rate_sweep",
    "rate_sweep_table",
    "run_table",
    "shard_table",
    "sweep_table",
    "timeline",
    "usl_throughput",
    "worker_gaps",
]
