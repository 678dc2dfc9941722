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
#
# usage: bench/protocols.sh [-r PAIRS] [-d SECONDS] [-s SHAPES]
#   SHAPES: a comma list of https1, h2-4x50, h2-1x100 (default: all three)
# Installs wrk, nginx and h2load (nghttp2-client) from Debian's packages if missing; leaves
# nothing running; raw results under bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

pairs=3
seconds=8
shapes=https1,h2-4x50,h2-1x100
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
    https1|h2-4x50|h2-1x100) ;;
    *) echo "error: unknown shape '$shape' in -s (use https1, h2-4x50 or h2-1x100)" >&2; exit 2 ;;
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

report=$(mktemp)
note() { printf '%s\n' "$*" | tee -a "$report" >&2; }

bench_setup nginx-tls
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
  esac
done

printf '\n==== summary (%s, %s, %s cores) ====\n' "$(date -u +%Y-%m-%d)" "$(uname -r)" "$(nproc)"
cat "$report"
rm -f "$report"
