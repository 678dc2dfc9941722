#!/usr/bin/env bash
# What a connected --dashboard page costs the closed model: interleaved runs of loadgen against
# loadgen-server without a dashboard ("loadgen") and with --dashboard and a reader of its event
# stream connected the whole run ("page", curl on the target's core, as a browser would be on
# another machine): requests/s and client CPU µs/request, with the with/without ratios (the
# issue's bound: CPU per request within 2 %).
#
# usage: bench/dashboard.sh [-c CONNECTIONS] [-d SECONDS] [-r PAIRS]
#
# Leaves nothing running; results go to bench/out/<timestamp>-server/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_pair_flags "$@"

bench_setup server
echo "$connections connections, ${seconds}s per run, $pairs interleaved pairs; results in $out" >&2

# The k-th run of each kind is one pair; which of the two goes first alternates, so a drift
# of the machine's speed weighs on both alike.
run_kind() {
  local kind=$1 i=$2 extra=() reader=
  if [ "$kind" = page ]; then
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    extra=(--dashboard "127.0.0.1:$port" --dashboard-linger 0s)
    # The reader connects as soon as the page is up and reads until the run ends.
    (for _ in $(seq 200); do
       taskset -c "$server_cpu" curl -sN --max-time $((seconds + 30)) "http://127.0.0.1:$port/events" \
         >"$out/events-$i.txt" 2>/dev/null || true
       [ -s "$out/events-$i.txt" ] && break
       sleep 0.05
     done) &
    reader=$!
  fi
  printf 'dashboard\t%s\t%s\n' "$kind" \
    "$(bench_loadgen "$kind-$i" -c "$connections" -d "${seconds}s" "${extra[@]}" | cut -f1-5)" \
    | tee -a "$out/pairs.tsv" >&2
  if [ -n "$reader" ]; then
    wait "$reader" || true
    local events
    events=$(grep -c '^data: ' "$out/events-$i.txt" || true)
    [ "$events" -ge $((seconds - 2)) ] || { echo "error: the page of run page-$i got $events events" >&2; exit 1; }
  fi
}
for i in $(seq "$pairs"); do
  if [ $((i % 2)) = 1 ]; then run_kind loadgen "$i"; run_kind page "$i"
  else run_kind page "$i"; run_kind loadgen "$i"; fi
done
echo "(loadgen: without --dashboard; page: with --dashboard and its event stream read throughout)" >&2
bench_medians dashboard page
