#!/usr/bin/env bash
# Three shards vs one process: the same scenario run unsharded, then as 3 shard processes
# started together with --start-at, against one loadgen-server (--service-time 5ms, 32 workers:
# 6,400 req/s capacity). For each model, prints what the merged analysis says of both —
# requests, throughput, p50/p99, per-second counts, shard shares and start skew.
#
# usage: bench/shards.sh [-d SECONDS]     (default 15 s per run; needs the venv that
#                                          scripts/test.sh creates, for loadgen-analyze)
# Leaves nothing running; raw runs under bench/out/<timestamp>-shards/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=15
while getopts "d:h" opt; do
  case $opt in
    d) seconds=$OPTARG ;;
    *) sed -n '2,9p' "$0"; exit 2 ;;
  esac
done
if [ ! -x .venv/bin/python ]; then
  echo "error: no .venv; run ./scripts/test.sh once (it creates it), then this again" >&2
  exit 2
fi

cargo build --release --locked -p loadgen -p loadgen-servers >&2
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-shards"
mkdir -p "$out"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
target/release/loadgen-server --port 0 --service-time 5ms --workers 32 >"$out/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$out/server.log" && break; sleep 0.1; done
url="$(grep -o 'http://[0-9.:]*' "$out/server.log" | head -1)/"

run() { # run NAME ARGS…: one process
  mkdir -p "$(dirname "$out/$1")"
  target/release/loadgen run --url "$url" --no-progress --json --out "$out/$1" "${@:2}" >"$out/$1.json"
}
models=(
  "closed:-c 48 -d ${seconds}s"
  "open:--rate 4000 -d ${seconds}s"
  "skiers:--scenario skiers --set model.total=60000"
)
for entry in "${models[@]}"; do
  name=${entry%%:*}
  read -r -a args <<<"${entry#*:}"
  echo "== $name: unsharded" >&2
  run "$name-unsharded" "${args[@]}"
  echo "== $name: 3 shards" >&2
  start=$(($(date +%s%3N) + 2000))
  shard_pids=()
  for i in 0 1 2; do
    run "$name-sharded/shard-$i" "${args[@]}" --shard "$i/3" --start-at "$start" &
    shard_pids+=($!)
  done
  for p in "${shard_pids[@]}"; do wait "$p"; done
done

.venv/bin/python - "$out" "${models[@]%%:*}" <<'PY'
import sys
from pathlib import Path

import loadgen_analysis as la

out = Path(sys.argv[1])
for name in sys.argv[2:]:
    one, three = out / f"{name}-unsharded", out / f"{name}-sharded"
    rows = {}
    for label, path in (("unsharded", one), ("3 shards", three)):
        table = la.run_table(path).iloc[0]
        ops = la.op_summary(path)
        tl = la.timeline(path, by_phase=False)
        full = tl[tl["covered_s"] >= 0.999]
        rows[label] = (table, ops, full.set_index("t_s")["requests"])
    (t1, o1, s1), (t3, o3, s3) = rows["unsharded"], rows["3 shards"]
    common = s1.index.intersection(s3.index)
    diff_pct = ((s3[common] - s1[common]).abs() / s1[common] * 100).describe()
    print(f"\n{name}")
    print(f"{'':24}{'unsharded':>14}{'3 shards':>14}{'ratio':>8}")
    for key, label in (("requests", "requests"), ("wall_s", "wall time s"), ("throughput_rps", "req/s")):
        a, b = float(t1[key]), float(t3[key])
        print(f"{label:24}{a:14.1f}{b:14.1f}{b / a:8.3f}")
    for q in ("p50_ms", "p99_ms"):
        a = float((o1[q] * o1["requests"]).sum() / o1["requests"].sum())
        b = float((o3[q] * o3["requests"]).sum() / o3["requests"].sum())
        print(f"{q + ' (req-weighted)':24}{a:14.2f}{b:14.2f}{b / a:8.3f}")
    print(
        f"per-second counts: {len(common)} full seconds, |3 shards − unsharded| / unsharded: "
        f"median {diff_pct['50%']:.2f} %, max {diff_pct['max']:.2f} %"
    )
    shards = la.shard_table(three)
    print(
        "shares: "
        + ", ".join(f"{r.shard} {r.share_pct:.2f} %" for r in shards.itertuples())
        + f"; start skew {shards['start_offset_skew_ms'].iloc[0]:.2f} ms "
        + f"(first requests {shards['first_request_skew_ms'].iloc[0]:.2f} ms apart)"
    )
PY
echo "raw runs: $out" >&2
