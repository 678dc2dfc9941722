#!/usr/bin/env bash
# Scale benchmark of loadgen-analyze (issue 14): records a short real run against the embedded
# reference server, tiles it into runs of 10 M and 100 M rows (loadgen_analysis.synthetic: every
# worker replays a real worker's requests, so timestamps, gaps and latencies are realistic), then
# runs summary, explain, report and compare on each and prints wall time and peak RSS
# (GNU time). Targets: < 60 s and < 1 GB peak RSS per command on 2 cores, flat in the rows.
#
# Needs ~1 GB of disk per 100 M rows plus DuckDB's spill files, and the venv of
# scripts/test-python.sh. Env: ROWS (default "10000000 100000000"), OUT (default bench/out/…),
# LOADGEN_ANALYSIS_MEMORY / _THREADS / _TMP (see loadgen_analysis.io.engine_settings).
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
cargo build --locked -p loadgen >&2
mkdir -p "$OUT"

echo "==> recording the seed run (8 workers, 3 s, embedded server)" >&2
target/debug/loadgen run -c 8 -d 3s --no-progress --out "$OUT/seed" >"$OUT/seed.log" 2>&1

# measure LABEL ARGS...: one loadgen-analyze command under GNU time; prints a table row.
measure() {
  local label=$1
  shift
  /usr/bin/time -o "$OUT/time.txt" -f "%e %M" "$PY" -m loadgen_analysis.cli "$@" \
    >"$OUT/$label.out" 2>"$OUT/$label.err" || true
  read -r seconds kb <"$OUT/time.txt"
  printf '%-12s %-9s %8.1f s %8.0f MB\n' "$rows" "$label" "$seconds" "$((kb / 1024))"
}

printf '%-12s %-9s %10s %11s\n' rows command time "peak RSS"
for rows in $ROWS; do
  run="$OUT/run-$rows"
  /usr/bin/time -o "$OUT/time.txt" -f "%e %M" "$PY" -m loadgen_analysis.synthetic \
    "$OUT/seed" "$run" "$rows" >"$OUT/synth-$rows.log" 2>&1
  read -r seconds _ <"$OUT/time.txt"
  echo "  ($rows rows synthesised in ${seconds} s, $(du -sh "$run" | cut -f1) on disk)" >&2
  measure summary summary "$run"
  measure explain explain "$run"
  measure report report "$run" -o "$OUT/report-$rows.html"
  # The run against itself: twice the rows read.
  measure compare compare "$run" "$run"
done
echo "(machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT)"
