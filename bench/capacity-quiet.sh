#!/usr/bin/env bash
# Capacity on a quiet host with the defaults (issue 59): `loadgen capacity --url URL --slo
# 'p99<50ms'`, no other flag, against loadgen-server --workers 8 --service-time 10ms (800 req/s),
# Go's net/http behind a semaphore of 8 × 10 ms (800) and gunicorn's 4 sync workers × 10 ms
# sleep (400), each graded `right` when its answer is within ±5 % of the limit in at most 60 s.
# Prints a Markdown table (docs/reference/capacity.md, "How long it takes"); run it on a quiet
# host. The runs stay in bench/out/<time>-capacity-quiet/.
#
# usage: bench/capacity-quiet.sh [ROUNDS]    (default 1: each server searched once)
#   LOADGEN_BIN=path   the binary searched with (default target/release/loadgen)
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/lib.sh
bench_venv

cargo build --release --locked -p loadgen -p loadgen-servers >&2
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-capacity-quiet"
mkdir -p "$out"
LOADGEN_BIN=${LOADGEN_BIN:-target/release/loadgen} LOADGEN_SERVER_BIN=target/release/loadgen-server \
  "$VENV/bin/python" -m loadgen_analysis.testing.capacity_quiet --out "$out" --rounds "${1:-1}" \
  | tee "$out/table.md"
