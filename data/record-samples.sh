#!/usr/bin/env bash
# Records the sample runs in data/runs/ against loadgen-server on 127.0.0.1, exactly as
# data/README.md lists them. Rerun it only when the record schema changes: the samples are
# meant to stay fixed so the notebooks and their figures do not drift.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p loadgen -p loadgen-servers >&2
L=target/release/loadgen
S=target/release/loadgen-server
log=$(mktemp)
server_pid=
stop_server() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; server_pid=; }
trap stop_server EXIT
start_server() {
  stop_server
  "$S" --port 0 "$@" >"$log" 2>/dev/null &
  server_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.05; done
  url=$(grep -o 'http://[0-9.:]*' "$log" | head -1)
}

rm -rf data/runs
mkdir -p data/runs/regression

start_server --service-time exp:2ms
"$L" run --scenario stepcounter --set model.max_workers=16 --url "$url" --no-progress --out data/runs/overview

start_server --workers 8 --service-time 10ms
"$L" sweep --url "$url/" --levels 1,2,4,8,16,32 -d 1500ms --no-progress --out data/runs/sweep-w8-10ms
"$L" run --url "$url/" -c 8 --think-time 30ms -d 2s --no-progress --out data/runs/think-time

start_server --service-time 5ms
for r in 1 2 3; do
  "$L" run --url "$url/" -c 8 -d 1s --no-progress --out "data/runs/regression/baseline-5ms/r$r"
done
start_server --service-time 8ms
for r in 1 2 3; do
  "$L" run --url "$url/" -c 8 -d 1s --no-progress --out "data/runs/regression/candidate-8ms/r$r"
done
du -sh data/runs
