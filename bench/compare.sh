#!/usr/bin/env bash
# Compare loadgen (every request recorded to Parquet) with wrk on the same target, in
# alternation: requests/s, client CPU time per request and peak RSS, with loadgen/wrk ratios.
#
# usage: bench/compare.sh [-c CONNECTIONS] [-d SECONDS] [-r PAIRS] [-t server|nginx]
#
# The target (loadgen-server with one runtime thread, or nginx with one worker answering
# `return 200`) is pinned to core 0 and both clients to core 1 when there are two cores.
# Installs wrk (and nginx when asked for) from Debian's packages if missing. Leaves nothing
# running; results go to bench/out/<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."

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
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
case $target in server|nginx) ;; *) echo "error: -t must be server or nginx (got '$target')" >&2; exit 2 ;; esac

need_pkgs=()
command -v wrk >/dev/null 2>&1 || need_pkgs+=(wrk)
[ -x /usr/bin/time ] || need_pkgs+=(time)
if [ "$target" = nginx ] && ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  need_pkgs+=(nginx-light)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing ${need_pkgs[*]} from Debian's packages" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

cargo build --release --locked -p loadgen -p loadgen-servers >&2

if [ "$(nproc)" -ge 2 ]; then server_cpu=0; client_cpu=1; else server_cpu=0; client_cpu=0; fi
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

if [ "$target" = server ]; then
  taskset -c "$server_cpu" target/release/loadgen-server --port 0 --threads 1 >"$out/server.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q "listening on" "$out/server.log" && break; sleep 0.1; done
  url="$(grep -o 'http://[0-9.:]*' "$out/server.log" | head -1)/"
else
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$out/nginx"
  cat >"$out/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $PWD/$out/nginx/nginx.pid;
error_log $PWD/$out/nginx/error.log;
events { worker_connections 20000; }
http {
  access_log off;
  server { listen 127.0.0.1:$port; location / { return 200 "hello, world\n"; } }
}
CONF
  nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
  taskset -c "$server_cpu" "$nginx_bin" -c "$PWD/$out/nginx/nginx.conf" -p "$PWD/$out/nginx" &
  pids+=($!)
  url="http://127.0.0.1:$port/"
  for _ in $(seq 100); do curl -fs "$url" >/dev/null 2>&1 && break; sleep 0.1; done
fi
echo "target: $target at $url; server on core $server_cpu, clients on core $client_cpu" >&2
echo "$connections connections, ${seconds}s per run, $pairs interleaved pairs; results in $out" >&2

ulimit -n "$(ulimit -Hn)" || true
results="$out/results.tsv"
printf 'tool\tpair\trequests\trps\tcpu_us_per_req\tpeak_rss_mb\n' >"$results"
for i in $(seq "$pairs"); do
  /usr/bin/time -f "%U %S %M" -o "$out/loadgen-$i.time" \
    taskset -c "$client_cpu" target/release/loadgen run --url "$url" -c "$connections" -d "${seconds}s" \
    --no-progress --json --out "$out/loadgen-$i" >"$out/loadgen-$i.json"
  python3 - "$out/loadgen-$i.json" "$out/loadgen-$i.time" "$i" >>"$results" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))["summary"]
user, system, rss_kb = open(sys.argv[2]).read().split()[-3:]
n = summary["requests"]
print(f"loadgen\t{sys.argv[3]}\t{n}\t{summary['throughput_rps']:.0f}\t{(float(user)+float(system))/n*1e6:.2f}\t{int(rss_kb)/1024:.1f}")
PY
  /usr/bin/time -f "%U %S %M" -o "$out/wrk-$i.time" \
    taskset -c "$client_cpu" wrk -t1 -c"$connections" -d"${seconds}s" "$url" >"$out/wrk-$i.txt"
  python3 - "$out/wrk-$i.txt" "$out/wrk-$i.time" "$i" >>"$results" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
n = int(re.search(r"(\d+) requests in", text).group(1))
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
user, system, rss_kb = open(sys.argv[2]).read().split()[-3:]
print(f"wrk\t{sys.argv[3]}\t{n}\t{rps:.0f}\t{(float(user)+float(system))/n*1e6:.2f}\t{int(rss_kb)/1024:.1f}")
PY
  tail -2 "$results" >&2
done

python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def med(tool, key):
    return statistics.median(float(r[key]) for r in rows if r["tool"] == tool)
print()
print(f"{'':18}{'loadgen':>12}{'wrk':>12}{'loadgen/wrk':>14}")
for key, label in [("rps", "requests/s"), ("cpu_us_per_req", "CPU µs/request"), ("peak_rss_mb", "peak RSS MB")]:
    a, b = med("loadgen", key), med("wrk", key)
    print(f"{label:18}{a:12.2f}{b:12.2f}{a / b:14.2f}")
print("(medians over the interleaved pairs)")
PY
