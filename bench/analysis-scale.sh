#!/usr/bin/env bash
# Scale benchmark of loadgen-analyze (issue 14): records a short real run against the embedded
# reference server, tiles it into runs of 10 M and 100 M rows (loadgen_analysis.testing.synthetic:
# every worker replays a real worker's requests, so timestamps, gaps and latencies are realistic), then
# runs summary, explain, report, compare (against a hard-linked copy of the run, so both sides
# are read) and the notebooks' other functions (phase_table, worker_gaps) on each, and prints
# wall time, peak RSS (GNU time) and the 1-minute load average when the command started.
# Targets: < 60 s and < 1 GB peak RSS per command on 2 cores, flat in the rows.
#
# Needs ~1 GB of disk per 100 M rows plus DuckDB's spill files, and the venv of
# scripts/test-python.sh; the synthetic runs are deleted at the end unless KEEP_RUNS=1 (a later run into the same OUT
# reuses them). Env:
# ROWS (default "10000000 100000000"), OUT (default bench/out/…), SYNTH_MEMORY (DuckDB's limit
# while tiling, default 4GB), LOADGEN_BIN (a loadgen
# binary to record the seed with, instead of building target/debug/loadgen),
# LOADGEN_ANALYSIS_MEMORY / _THREADS / _TMP (see loadgen_analysis.io.engine.engine_settings).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-"10000000 100000000"}
OUT=${OUT:-bench/out/$(date -u +%Y%m%dT%H%M%SZ)-analysis-scale}
PY=.venv/bin/python
if [ ! -x "$PY" ]; then
  echo "error: no .venv; run ./scripts/test-python.sh once to create it" >&2
  exit 2
fi
if [ ! -x /usr/bin/time ]; then
  echo "installing GNU time from Debian's packages" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
fi
LOADGEN=${LOADGEN_BIN:-target/debug/loadgen}
if [ -z "${LOADGEN_BIN:-}" ]; then
  cargo build --locked -p loadgen >&2
fi
mkdir -p "$OUT"
# Bytecode compiled once, so no measured command pays for compiling Python sources (a venv made
# by uv has none, and PYTHONDONTWRITEBYTECODE keeps imports from writing it).
"$PY" -m compileall -q -j 0 .venv/lib analysis/loadgen_analysis >/dev/null

if [ ! -d "$OUT/seed" ]; then
  echo "==> recording the seed run (8 workers, 3 s, embedded server)" >&2
  "$LOADGEN" run -c 8 -d 3s --no-progress --out "$OUT/seed" >"$OUT/seed.log" 2>&1
fi

# measure LABEL ARGS...: one `python ARGS...` under GNU time; prints a table row.
measure() {
  local label=$1 load
  shift
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! /usr/bin/time -o "$OUT/time.txt" -f "%e %M" "$PY" "$@" \
    >"$OUT/$label-$rows.out" 2>"$OUT/$label-$rows.err"; then
    echo "  ($label failed: see $OUT/$label-$rows.err)" >&2
  fi
  read -r seconds kb < <(tail -n1 "$OUT/time.txt")
  printf '%-12s %-9s %8.1f s %8.0f MB %6s\n' "$rows" "$label" "$seconds" "$((kb / 1024))" "$load"
}
# The notebooks' functions that no command above runs.
NOTEBOOK='import sys, loadgen_analysis as la; r = la.load_runs(sys.argv[1:]); la.phase_table(r); la.worker_gaps(r)'

printf '%-12s %-9s %10s %11s %6s\n' rows command time "peak RSS" load
for rows in $ROWS; do
  run="$OUT/run-$rows"
  if [ -d "$run" ]; then # kept by an earlier KEEP_RUNS=1 run into the same OUT
    echo "  (reusing $run)" >&2
  else
    # Tiling sorts the copies: more memory than an analysis may take (not measured).
    LOADGEN_ANALYSIS_MEMORY=${SYNTH_MEMORY:-4GB} /usr/bin/time -o "$OUT/time.txt" -f "%e %M" \
      "$PY" -m loadgen_analysis.testing.synthetic \
      "$OUT/seed" "$run" "$rows" >"$OUT/synth-$rows.log" 2>&1
    read -r seconds _ < <(tail -n1 "$OUT/time.txt")
    echo "  ($rows rows synthesised in ${seconds} s, $(du -sh "$run" | cut -f1) on disk)" >&2
  fi
  rm -rf "$run-copy"
  cp -al "$run" "$run-copy" # same files, another run: compare reads both sides
  measure summary -m loadgen_analysis.cli summary "$run"
  measure explain -m loadgen_analysis.cli explain "$run"
  measure report -m loadgen_analysis.cli report "$run" -o "$OUT/report-$rows.html"
  measure compare -m loadgen_analysis.cli compare "$run" "$run-copy"
  measure notebook -c "$NOTEBOOK" "$run"
  if [ "${KEEP_RUNS:-0}" != 1 ]; then
    rm -rf "$run" "$run-copy"
  fi
done
echo "(machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; results in $OUT)"
