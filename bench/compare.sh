#!/usr/bin/env bash
# Compare loadgen (every request recorded to Parquet) with wrk on the same target, in
# alternation: requests/s, client CPU time per request and peak RSS, with loadgen/wrk ratios.
#
# usage: bench/compare.sh [-c CONNECTIONS] [-d SECONDS] [-r PAIRS] [-t server|nginx]
#
# The target (loadgen-server with one runtime thread, or nginx with one worker answering
# `return 200`) is pinned to core 0 and both clients to core 1 when there are two cores.
# Installs wrk (and nginx when asked for) from Debian's packages if missing. Leaves nothing
# running; results go to bench/out/<timestamp>-<target>/. bench/perf.sh runs every figure of
# docs/reference/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

connections=50
seconds=10
pairs=3
target=server
while getopts "c:d:r:t:h" opt; do
  case $opt in
    c) connections=$OPTARG ;;
    d) seconds=$OPTARG ;;
    r) pairs=$OPTARG ;;
    t) target=$OPTARG ;;
    *) sed -n '2,11p' "$0"; exit 2 ;;
  esac
done
case $target in server|nginx) ;; *) echo "error: -t must be server or nginx (got '$target')" >&2; exit 2 ;; esac

bench_setup "$target"
echo "$connections connections, ${seconds}s per run, $pairs interleaved pairs; results in $out" >&2
bench_pairs "$connections" "$seconds" "$pairs" "c$connections"
