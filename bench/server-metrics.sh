#!/usr/bin/env bash
# What --server-metrics costs the closed model: interleaved runs of loadgen against
# loadgen-server with a 1 s scrape of node_exporter (Debian's prometheus-node-exporter, on the
# target's core, as on a target host) and without one: requests/s and client CPU µs/request,
# with the with/without ratios (the issue's bound: at most 1 % of throughput).
#
# usage: bench/server-metrics.sh [-c CONNECTIONS] [-d SECONDS] [-r PAIRS]
#
# Installs prometheus-node-exporter from Debian's packages if missing; leaves nothing
# running; results go to bench/out/<timestamp>-server/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_pair_flags "$@"

if ! command -v prometheus-node-exporter >/dev/null 2>&1; then
  echo "installing prometheus-node-exporter from Debian's packages" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-node-exporter >/dev/null
fi
bench_setup server
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c "$server_cpu" prometheus-node-exporter --web.listen-address="127.0.0.1:$port" \
  >"$out/node-exporter.log" 2>&1 &
bench_pids+=($!)
scrape="http://127.0.0.1:$port/metrics"
for _ in $(seq 100); do curl -fs "$scrape" >/dev/null 2>&1 && break; sleep 0.1; done
echo "$connections connections, ${seconds}s per run, $pairs interleaved pairs, node_exporter at $scrape; results in $out" >&2

# The k-th run of each kind is one pair; which of the two goes first alternates, so a drift
# of the machine's speed weighs on both alike.
run_kind() {
  local kind=$1 i=$2 extra=()
  [ "$kind" = scraped ] && extra=(--server-metrics "$scrape")
  printf 'scrape\t%s\t%s\n' "$kind" \
    "$(bench_loadgen "$kind-$i" -c "$connections" -d "${seconds}s" "${extra[@]}" | cut -f1-5)" \
    | tee -a "$out/pairs.tsv" >&2
}
for i in $(seq "$pairs"); do
  if [ $((i % 2)) = 1 ]; then run_kind loadgen "$i"; run_kind scraped "$i"
  else run_kind scraped "$i"; run_kind loadgen "$i"; fi
done
for i in $(seq "$pairs"); do
  [ -s "$out/scraped-$i/server-metrics.parquet" ] || { echo "error: run scraped-$i wrote no server-metrics.parquet" >&2; exit 1; }
done
echo "(loadgen: without --server-metrics; scraped: with a 1 s scrape of node_exporter)" >&2
bench_medians scrape scraped
