"""Reductions of the raw records to small frames, run in DuckDB (and one streaming scan).

:mod:`.cache` keeps one connection, rollup and result per set of runs while a command or a
report runs; :mod:`.summary` reduces per op and per run; :mod:`.timeline` per time bucket and
phase; :mod:`.gaps` scans each worker's requests in order for the gaps between them and
:mod:`.gap_tables` turns the scan into tables; :mod:`.quantiles` computes exact quantiles in
bounded memory; :mod:`.rollup` builds the per-second rollup; :mod:`.checks` reads the response
checks. Nothing here fits a model or gives a verdict.
"""
