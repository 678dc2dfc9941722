#!/usr/bin/env bash
# Every figure of docs/reference/performance.md, on this machine, in one run (~8 min):
# loadgen (every request recorded) against wrk, interleaved, target on core 0 and clients on
# core 1 — against loadgen-server and nginx at 50 connections, nginx at 1,000 connections;
# 10,000 connections held open against nginx; peak RSS of a 10 s and a 100 s run; bytes per
# request on disk and the time workers waited handing records to the writer; the open model
# at 20,000 req/s against nginx (sends within 1 ms of their intended time). HTTPS/1.1 vs wrk
# and HTTP/2 vs h2load: bench/protocols.sh.
#
# usage: bench/perf.sh [-r PAIRS] [-d SECONDS]    (defaults: 3 pairs of 10 s runs)
# Installs wrk and nginx from Debian's packages if missing; leaves nothing running; raw
# results under bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

pairs=3
seconds=10
while getopts "r:d:h" opt; do
  case $opt in
    r) pairs=$OPTARG ;;
    d) seconds=$OPTARG ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done

report=$(mktemp)
note() { printf '%s\n' "$*" | tee -a "$report" >&2; }

bench_setup server
note "== loadgen-server (one thread), 50 connections"
bench_pairs 50 "$seconds" "$pairs" server-c50 | tee -a "$report"
bench_cleanup

bench_setup nginx
note "== nginx (one worker, return 200), 50 connections"
bench_pairs 50 "$seconds" "$pairs" nginx-c50 | tee -a "$report"
note "== nginx, 1,000 connections"
bench_pairs 1000 "$seconds" "$pairs" nginx-c1000 | tee -a "$report"

note "== nginx, 10,000 connections held open for ${seconds}s"
IFS=$'\t' read -r n rps cpu rss failed _ <<<"$(bench_loadgen c10000 -c 10000 -d "${seconds}s" --connect-timeout 30s)"
note "requests $n, $rps req/s, failed $failed, peak RSS $rss MB"

note "== memory and records: 50 connections for 10 s and for 100 s"
IFS=$'\t' read -r n10 _ _ rss10 _ bpr10 blocked10 _ <<<"$(bench_loadgen mem10 -c 50 -d 10s)"
IFS=$'\t' read -r n100 _ _ rss100 _ bpr100 blocked100 _ <<<"$(bench_loadgen mem100 -c 50 -d 100s)"
note "$(python3 -c "print(f'peak RSS 10 s {$rss10} MB, 100 s {$rss100} MB (100 s / 10 s = {$rss100 / $rss10:.2f})')")"
note "bytes per request on disk: $bpr10 (10 s), $bpr100 (100 s); workers waited handing records over: $blocked10 ms of $n10 requests, $blocked100 ms of $n100"

note "== open model: 20,000 req/s against nginx for ${seconds}s, late = more than 1 ms after intended"
IFS=$'\t' read -r n rps _ _ failed _ _ late scheduled <<<"$(bench_loadgen open20k --rate 20000 -d "${seconds}s" --max-lateness 1ms)"
note "$(python3 -c "print(f'scheduled $scheduled, sent $n, late $late: {100 * (1 - $late / max($scheduled, 1)):.3f} % within 1 ms; failed $failed')")"

printf '\n==== summary (%s, %s, %s cores) ====\n' "$(date -u +%Y-%m-%d)" "$(uname -r)" "$(nproc)"
cat "$report"
rm -f "$report"
