#!/usr/bin/env bash
# HTTP/3: loadgen (every request recorded) against oha built with its `http3` feature (the one
# peer with HTTP/3: h3 + h3-quinn + quinn, as loadgen), release builds, to
# `loadgen-server --http3 --threads 1` (QUIC on UDP, a self-signed certificate made here) on
# core 0, clients on core 1, interleaved pairs, medians and ratios of requests/s and client CPU
# (user + sys) per request:
#   h3-1x1     1 connection x 1 stream       loadgen --http3 -c 1              vs oha -c 1 -p 1
#   h3-1x16    1 connection x 16 streams     loadgen --http3 -c 1 --streams-per-connection 16
#                                                                              vs oha -c 1 -p 16
#   h3-4x16    4 connections x 16 streams    loadgen --http3 -c 4 --streams-per-connection 16
#                                                                              vs oha -c 4 -p 16
#
# usage: bench/http3.sh [-r PAIRS] [-d SECONDS] [-s SHAPES]
#   SHAPES: a comma list of h3-1x1, h3-1x16, h3-4x16 (default: all three)
# oha 1.16.0 is built once into bench/tools/ (`cargo install oha@1.16.0 --locked --features
# http3`); leaves nothing running; raw results under bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

OHA_VERSION=1.16.0
pairs=3
seconds=8
shapes=h3-1x1,h3-1x16,h3-4x16
while getopts "r:d:s:h" opt; do
  case $opt in
    r) pairs=$OPTARG ;;
    d) seconds=$OPTARG ;;
    s) shapes=$OPTARG ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
for shape in ${shapes//,/ }; do
  case $shape in
    h3-*x*) ;;
    *) echo "error: unknown shape '$shape' in -s (use h3-1x1, h3-1x16 or h3-4x16)" >&2; exit 2 ;;
  esac
done

oha=bench/tools/bin/oha
if ! "$oha" --version 2>/dev/null | grep -q "$OHA_VERSION"; then
  echo "building oha $OHA_VERSION with http3 into bench/tools/" >&2
  cargo install "oha@$OHA_VERSION" --locked --features http3 --root bench/tools >&2
fi
bench_install server
[ -n "${LOADGEN:-}" ] || cargo build --release --locked -p loadgen -p loadgen-servers >&2
if [ "$(nproc)" -ge 2 ]; then server_cpu=0; client_cpu=1; else server_cpu=0; client_cpu=0; fi
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-http3"
mkdir -p "$out"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE \
  -keyout "$out/key.pem" -out "$out/cert.pem" 2>/dev/null
taskset -c "$server_cpu" target/release/loadgen-server --http3 --tls-cert "$out/cert.pem" \
  --tls-key "$out/key.pem" --port 0 --threads 1 >"$out/server.out" 2>"$out/server.log" &
bench_pids+=($!)
for _ in $(seq 100); do [ -s "$out/server.out" ] && break; sleep 0.1; done
url="$(grep -o 'https://[0-9.:]*' "$out/server.out" | head -1)/"
echo "target: loadgen-server --http3 at $url; server on core $server_cpu, clients on core $client_cpu" >&2

# bench_oha NAME CONNECTIONS STREAMS SECONDS: oha over HTTP/3 on the client core; prints
# requests, req/s, CPU µs/request, peak RSS MB, failed requests.
bench_oha() {
  local name=$1 connections=$2 streams=$3 seconds=$4
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" \
    taskset -c "$client_cpu" "$oha" --http-version 3 --cacert "$out/cert.pem" --no-tui \
    --output-format json -c "$connections" -p "$streams" -z "${seconds}s" "$url" >"$out/$name.json"
  python3 - "$out/$name.json" "$out/$name.time" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
codes = report.get("statusCodeDistribution") or {}
errors = sum((report.get("errorDistribution") or {}).values())
n = sum(codes.values()) + errors
user, system, rss_kb = open(sys.argv[2]).read().split()[-3:]
rps = report["summary"]["requestsPerSec"]
print(f"{n}\t{rps:.0f}\t{(float(user) + float(system)) / n * 1e6:.2f}\t{int(rss_kb) / 1024:.1f}\t{n - codes.get('200', 0)}")
PY
}

report=$(mktemp)
for shape in ${shapes//,/ }; do
  IFS=x read -r connections streams <<<"${shape#h3-}"
  echo "== HTTP/3, $connections connection(s) x $streams stream(s): loadgen vs oha" | tee -a "$report" >&2
  for i in $(seq "$pairs"); do
    printf '%s\tloadgen\t%s\n' "$shape" "$(bench_loadgen "$shape-loadgen-$i" --http3 --cacert "$out/cert.pem" \
      -c "$connections" --streams-per-connection "$streams" -d "${seconds}s" | cut -f1-5)" \
      | tee -a "$out/pairs.tsv" >&2
    printf '%s\toha\t%s\n' "$shape" "$(bench_oha "$shape-oha-$i" "$connections" "$streams" "$seconds")" \
      | tee -a "$out/pairs.tsv" >&2
  done
  bench_medians "$shape" oha | tee -a "$report"
done

printf '\n==== summary (%s, %s, %s cores) ====\n' "$(date -u +%Y-%m-%d)" "$(uname -r)" "$(nproc)"
cat "$report"
rm -f "$report"
