#!/usr/bin/env bash
# loadgen (every request recorded) against the field's reference client for each protocol,
# over HTTPS to nginx (one worker, `return 200`, HTTP/2 enabled, a self-signed certificate made
# here), target on core 0 and clients on core 1, interleaved pairs, medians and ratios of
# requests/s and client CPU (user + sys) per request:
#   HTTPS/1.1, 50 connections          loadgen -c 50               vs wrk -t1 -c50
#   h2, 4 connections x 50 streams     loadgen --http2 -c 4 --streams-per-connection 50
#                                                                   vs h2load -t1 -c4 -m50
#   h2, 1 connection x 100 streams     loadgen --http2 -c 1 --streams-per-connection 100
#                                                                   vs h2load -t1 -c1 -m100
#   gRPC, 2 connections x 8 streams    loadgen --grpc -c 2 --streams-per-connection 8
#     to grpcio's server (Python,      vs ghz --connections 2 -c 16 (built from the Go module
#     analysis/zoo.lock, 4 threads)       proxy into bench/tools/ if missing), else vs nothing:
#                                         the server's own count is checked either way
#
# usage: bench/protocols.sh [-r PAIRS] [-d SECONDS] [-s SHAPES]
#   SHAPES: a comma list of https1, h2-4x50, h2-1x100, grpc-2x8 (default: all four)
# Installs wrk, nginx and h2load (nghttp2-client) from Debian's packages if missing; leaves
# nothing running; raw results under bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

pairs=3
seconds=8
shapes=https1,h2-4x50,h2-1x100,grpc-2x8
while getopts "r:d:s:h" opt; do
  case $opt in
    r) pairs=$OPTARG ;;
    d) seconds=$OPTARG ;;
    s) shapes=$OPTARG ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
  esac
done

for shape in ${shapes//,/ }; do
  case $shape in
    https1|h2-4x50|h2-1x100|grpc-2x8) ;;
    *) echo "error: unknown shape '$shape' in -s (use https1, h2-4x50, h2-1x100 or grpc-2x8)" >&2; exit 2 ;;
  esac
done

# bench_h2load NAME CONNECTIONS STREAMS SECONDS: h2load on the client core; prints requests,
# req/s, CPU µs/request, peak RSS MB, failed + errored requests.
bench_h2load() {
  local name=$1 connections=$2 streams=$3 seconds=$4
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" \
    taskset -c "$client_cpu" h2load -t1 -c"$connections" -m"$streams" -D"$seconds" "$url" >"$out/$name.txt"
  python3 - "$out/$name.txt" "$out/$name.time" "$seconds" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", text)
n, failed = int(m.group(1)), int(m.group(3)) + int(m.group(4))
rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", text).group(1))
user, system, rss_kb = open(sys.argv[2]).read().split()[-3:]
print(f"{n}\t{rps:.0f}\t{(float(user) + float(system)) / n * 1e6:.2f}\t{int(rss_kb) / 1024:.1f}\t{failed}")
PY
}

# bench_ghz NAME CONNECTIONS CONCURRENCY SECONDS: ghz on the client core against the greeter;
# prints requests, req/s, CPU µs/request, peak RSS MB, failed requests.
bench_ghz() {
  local name=$1 connections=$2 concurrency=$3 seconds=$4
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" \
    taskset -c "$client_cpu" "$ghz" --insecure --proto "$PWD/$out/demo.proto" --call demo.Greeter/Hello \
    -d '{"name": "ann"}' --connections "$connections" -c "$concurrency" -z "${seconds}s" \
    --format json "${grpc_url#http://}" >"$out/$name.json"
  python3 - "$out/$name.json" "$out/$name.time" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
codes = report.get("statusCodeDistribution") or {}
n = sum(codes.values()) or report["count"]
user, system, rss_kb = open(sys.argv[2]).read().split()[-3:]
print(f"{n}\t{report['rps']:.0f}\t{(float(user) + float(system)) / n * 1e6:.2f}\t{int(rss_kb) / 1024:.1f}\t{n - codes.get('OK', 0)}")
PY
}

# grpc_setup: the greeter (grpcio, Python) on the server core, ghz if it can be had.
grpc_setup() {
  bench_venv
  taskset -c "$server_cpu" .venv/bin/python -m loadgen_analysis.examples.grpc_greeter \
    --proto "$out/demo.proto" --url-file "$out/greeter.url" >"$out/greeter.log" 2>&1 &
  grpc_pid=$!
  bench_pids+=("$grpc_pid")
  for _ in $(seq 200); do [ -s "$out/greeter.url" ] && break; sleep 0.1; done
  grpc_url=$(cat "$out/greeter.url")
  ghz=$(command -v ghz || echo bench/tools/bin/ghz)
  if [ ! -x "$ghz" ] && command -v go >/dev/null; then
    GOBIN="$PWD/bench/tools/bin" go install github.com/bojand/ghz/cmd/ghz@v0.93.0 >&2 || true
  fi
  [ -x "$ghz" ] || ghz=""
}

report=$(mktemp)
note() { printf '%s\n' "$*" | tee -a "$report" >&2; }

# nginx only for the HTTP shapes; gRPC alone needs just the folder and the cores.
http_shapes=${shapes//grpc-2x8/}
if [ -n "${http_shapes//,/}" ]; then
  bench_setup nginx-tls
else
  # gRPC alone: no target of bench_setup's, only loadgen, the results folder and the cores.
  [ -n "${LOADGEN:-}" ] || cargo build --release --locked -p loadgen >&2
  if [ "$(nproc)" -ge 2 ]; then server_cpu=0; client_cpu=1; else server_cpu=0; client_cpu=0; fi
  out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-grpc"
  mkdir -p "$out"
fi
for shape in ${shapes//,/ }; do
  case $shape in
    https1)
      note "== HTTPS/1.1, 50 connections: loadgen vs wrk"
      for i in $(seq "$pairs"); do
        printf '%s\tloadgen\t%s\n' "$shape" "$(bench_loadgen "$shape-loadgen-$i" "${loadgen_tls[@]}" -c 50 -d "${seconds}s" | cut -f1-5)" \
          | tee -a "$out/pairs.tsv" >&2
        printf '%s\twrk\t%s\n' "$shape" "$(bench_wrk "$shape-wrk-$i" 50 "$seconds")" | tee -a "$out/pairs.tsv" >&2
      done
      bench_medians "$shape" wrk | tee -a "$report"
      ;;
    h2-*)
      IFS=x read -r connections streams <<<"${shape#h2-}"
      note "== h2, $connections connection(s) x $streams streams: loadgen vs h2load"
      for i in $(seq "$pairs"); do
        printf '%s\tloadgen\t%s\n' "$shape" "$(bench_loadgen "$shape-loadgen-$i" "${loadgen_tls[@]}" --http2 \
          -c "$connections" --streams-per-connection "$streams" -d "${seconds}s" | cut -f1-5)" \
          | tee -a "$out/pairs.tsv" >&2
        printf '%s\th2load\t%s\n' "$shape" "$(bench_h2load "$shape-h2load-$i" "$connections" "$streams" "$seconds")" \
          | tee -a "$out/pairs.tsv" >&2
      done
      bench_medians "$shape" h2load | tee -a "$report"
      ;;
    grpc-*)
      IFS=x read -r connections streams <<<"${shape#grpc-}"
      grpc_setup
      note "== gRPC, $connections connection(s) x $streams streams to grpcio: loadgen vs ${ghz:-(no ghz)}"
      for i in $(seq "$pairs"); do
        printf '%s\tloadgen\t%s\n' "$shape" "$(url=$grpc_url bench_loadgen "$shape-loadgen-$i" \
          --proto "$out/demo.proto" --grpc demo.Greeter/Hello -b '{"name": "ann"}' \
          -c "$connections" --streams-per-connection "$streams" -d "${seconds}s" | cut -f1-5)" \
          | tee -a "$out/pairs.tsv" >&2
        [ -z "$ghz" ] || printf '%s\tghz\t%s\n' "$shape" "$(bench_ghz "$shape-ghz-$i" "$connections" \
          "$((connections * streams))" "$seconds")" | tee -a "$out/pairs.tsv" >&2
      done
      kill -INT "$grpc_pid"; wait "$grpc_pid" 2>/dev/null || true
      served=$(grep -o 'calls [0-9]*' "$out/greeter.log" | cut -d' ' -f2)
      recorded=$(awk -F'\t' -v s="$shape" '$1 == s { n += $3 } END { print n }' "$out/pairs.tsv")
      note "grpcio counted $served calls; loadgen and ghz reported $recorded together"
      if [ -n "$ghz" ]; then bench_medians "$shape" ghz | tee -a "$report"; fi
      ;;
  esac
done

printf '\n==== summary (%s, %s, %s cores) ====\n' "$(date -u +%Y-%m-%d)" "$(uname -r)" "$(nproc)"
cat "$report"
rm -f "$report"
