#!/usr/bin/env bash
# The time a capacity search spends between its levels — connecting, judging, writing, the
# watcher's end — measured as capacity.json's elapsed_s less every level's sending and
# cool-down, per level. Against loadgen-server (8 workers × 5 ms) on core 0, the search on
# core 1, with --start-rate (no calibration) and 2 s levels.
#
# usage: bench/between-levels.sh [LOADGEN]    (default: this checkout's release build)
# Compare two builds by running it with each binary in turn.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${1:-}" ] || cargo build --release --locked -p loadgen -p loadgen-servers >&2
loadgen=${1:-target/release/loadgen}
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-between-levels"
mkdir -p "$(dirname "$out")"
port=$((20000 + RANDOM % 20000))
taskset -c 0 target/release/loadgen-server --port "$port" --workers 8 --service-time 5ms >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
taskset -c 1 "$loadgen" capacity --url "http://127.0.0.1:$port/albums/1" --slo 'p99<50ms' \
  --start-rate 100 --level-duration 2s --warmup 500ms --cool-down 300ms --tolerance 10% \
  --confirm-levels 1 --max-rate 3000 --json --no-progress --out "$out" >/dev/null 2>"$out.log" || true
python3 - "$out/capacity.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
levels = c["levels"]
sending = sum(l["duration_s"] + l.get("cool_down_s", 0) for l in levels)
between = (c["elapsed_s"] - sending) / len(levels)
print(f"{len(levels)} levels, {c['elapsed_s']:.2f} s in all, {sending:.2f} s sending and cooling "
      f"down: {between * 1000:.0f} ms between levels each; answer {c['capacity_rps']} req/s")
PY
