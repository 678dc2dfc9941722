"""A history of runs for regression checks across many runs, not only pairs (issue 37).

:mod:`.record` turns a run (or a ``loadgen capacity`` directory) into the rows of one small
Parquet file: when it ran, its labels (commit, branch, build), a fingerprint of what was tested
and its figures per op. :mod:`.store` writes that file into a store — a local folder or an
``s3://`` prefix, one file per run and never a read-modify-write, so CI jobs appending at once
lose nothing — and reads the whole store back with DuckDB by glob. :mod:`.changes` finds change
points per series and metric with Apache Otava's E-divisive means, and judges the newest ones
(the gate of ``loadgen-analyze history check``); :mod:`.trend` draws the trend report.
"""

#: Otava's significance level for a change point (its own default); ``--max-pvalue``.
DEFAULT_MAX_PVALUE = 0.001

#: What ``history check`` judges unless told otherwise (``--metric``).
DEFAULT_GATED = ("throughput_rps", "p50_ms", "p99_ms", "error_rate", "capacity_rps")

#: A series shorter than this is not judged (too few runs to tell a change from noise).
MIN_RUNS = 6

#: A change point needs this many runs after it before it can fail the gate.
MIN_RUNS_AFTER = 3
