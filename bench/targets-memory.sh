#!/usr/bin/env bash
# Memory per target (issue 45, finding 12): peak RSS of `loadgen run --targets FILE -c 4 -d 1s`
# with 1, 500 and 1,000 targets (one op each) against loadgen-server, and the growth per
# target over the one-target run — loadgen against itself with one target, as a ratio. Fails
# (exit 1) when 500 targets cost more than 32 KB each.
#
# usage: bench/targets-memory.sh [LOADGEN [LOADGEN_SERVER]]   (default: this checkout's
# release build). Compare two builds by running it with each binary in turn.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${1:-}" ] || cargo build --release --locked -p loadgen -p loadgen-servers >&2
loadgen=${1:-target/release/loadgen}
server_bin=${2:-target/release/loadgen-server}
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-targets-memory"
mkdir -p "$out"
port=$((20000 + RANDOM % 20000))
"$server_bin" --port "$port" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
rss_kb() {
  local n=$1 i
  for i in $(seq "$n"); do printf 'GET http://127.0.0.1:%s/albums/%s\n\n' "$port" "$i"; done >"$out/targets-$n.txt"
  /usr/bin/time -f "%M" -o "$out/time-$n" "$loadgen" run --targets "$out/targets-$n.txt" -c 4 -d 1s \
    --no-progress --json --out "$out/run-$n" >"$out/run-$n.json" 2>"$out/run-$n.log"
  tail -1 "$out/time-$n"
}
one=$(rss_kb 1)
five=$(rss_kb 500)
thousand=$(rss_kb 1000)
python3 - "$one" "$five" "$thousand" <<'PY'
import sys
one, five, thousand = (int(x) for x in sys.argv[1:])
print(f"peak RSS: 1 target {one / 1024:.1f} MiB, 500 targets {five / 1024:.1f} MiB, "
      f"1000 targets {thousand / 1024:.1f} MiB")
print(f"per target over one: {(five - one) / 499:.1f} KB (500), {(thousand - one) / 999:.1f} KB (1000); "
      f"1000 targets / 1 target = {thousand / one:.2f}")
bound_kb = 32
if (five - one) / 499 > bound_kb:
    sys.exit(f"FAIL: 500 targets cost more than {bound_kb} KB each")
print(f"PASS: 500 targets cost under {bound_kb} KB each")
PY
