# Shared by the bench scripts (source it; not a command): install the tools, build, start a
# target pinned to its own core, run loadgen and wrk pinned to the other, read their figures.
#
# After `bench_setup TARGET`: $url is the target, $out the results folder, $client_cpu the
# core clients run on; everything started is stopped on exit.

bench_pids=()
bench_cleanup() {
  for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bench_pids=()
}
trap bench_cleanup EXIT

# Installs what is missing from Debian's packages: wrk, GNU time, nginx (for the nginx
# targets), curl; for nginx-tls also h2load (nghttp2-client) and openssl.
bench_install() {
  local need=()
  command -v wrk >/dev/null 2>&1 || need+=(wrk)
  [ -x /usr/bin/time ] || need+=(time)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  if [ "${1:-}" != server ] && ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    need+=(nginx-light)
  fi
  if [ "${1:-}" = nginx-tls ]; then
    command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
    command -v openssl >/dev/null 2>&1 || need+=(openssl)
  fi
  if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]} from Debian's packages" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
}

# bench_setup server|nginx|nginx-tls: installs, builds, starts the target on core 0 (clients
# get core 1). nginx-tls serves HTTPS with HTTP/2 (ALPN h2 and http/1.1) under a self-signed
# certificate made here (trusted by none of the clients: $loadgen_tls holds loadgen's
# --insecure; verification costs only the handshake).
bench_setup() {
  local target=$1
  bench_install "$target"
  # LOADGEN=path/to/loadgen benchmarks that binary instead of building this checkout's.
  [ -n "${LOADGEN:-}" ] || cargo build --release --locked -p loadgen -p loadgen-servers >&2
  if [ "$(nproc)" -ge 2 ]; then server_cpu=0; client_cpu=1; else server_cpu=0; client_cpu=0; fi
  out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-$target"
  mkdir -p "$out"
  # Many connections need many descriptors, in the clients and in nginx.
  ulimit -n "$(ulimit -Hn)" || true
  if [ "$target" = server ]; then
    taskset -c "$server_cpu" target/release/loadgen-server --port 0 --threads 1 >"$out/server.log" 2>&1 &
    bench_pids+=($!)
    for _ in $(seq 100); do grep -q "listening on" "$out/server.log" && break; sleep 0.1; done
    url="$(grep -o 'http://[0-9.:]*' "$out/server.log" | head -1)/"
  else
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    mkdir -p "$out/nginx"
    local listen="listen 127.0.0.1:$port backlog=16384;" scheme=http
    loadgen_tls=()
    if [ "$target" = nginx-tls ]; then
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
        -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
        -keyout "$out/nginx/key.pem" -out "$out/nginx/cert.pem" 2>/dev/null
      listen="listen 127.0.0.1:$port ssl http2 backlog=16384;
    ssl_certificate $PWD/$out/nginx/cert.pem; ssl_certificate_key $PWD/$out/nginx/key.pem;
    http2_max_concurrent_streams 1000;"
      scheme=https
      loadgen_tls=(--insecure)
    fi
    cat >"$out/nginx/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 30000;
daemon off;
pid $PWD/$out/nginx/nginx.pid;
error_log $PWD/$out/nginx/error.log;
events { worker_connections 20000; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  server {
    $listen
    location / { return 200 "hello, world\n"; }
  }
}
CONF
    local nginx_bin
    nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
    taskset -c "$server_cpu" "$nginx_bin" -c "$PWD/$out/nginx/nginx.conf" -p "$PWD/$out/nginx" &
    bench_pids+=($!)
    url="$scheme://127.0.0.1:$port/"
    for _ in $(seq 100); do curl -kfs "$url" >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  echo "target: $target at $url; server on core $server_cpu, clients on core $client_cpu" >&2
}

# bench_loadgen NAME ARGS…: runs loadgen on the client core with --json into $out/NAME(.json,
# .time) and prints one TSV row: requests, req/s, CPU µs/request, peak RSS MB, failed,
# bytes/request on disk, ms workers waited handing records over, late, scheduled.
bench_loadgen() {
  local name=$1
  shift
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" \
    taskset -c "$client_cpu" "${LOADGEN:-target/release/loadgen}" run --url "$url" --no-progress --json \
    --out "$out/$name" "$@" >"$out/$name.json"
  python3 - "$out/$name.json" "$out/$name.time" "$out/$name/run.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))["summary"]
user, system, rss_kb = open(sys.argv[2]).read().split()[-3:]
records = json.load(open(sys.argv[3]))["records"]
n = summary["requests"]
open_ = summary.get("open") or {}
print("\t".join(str(x) for x in [
    n, f"{summary['throughput_rps']:.0f}", f"{(float(user) + float(system)) / n * 1e6:.2f}",
    f"{int(rss_kb) / 1024:.1f}", summary["failed"], f"{records['bytes_on_disk'] / max(n, 1):.2f}",
    f"{summary['record_handoff_blocked_ns'] / 1e6:.1f}", open_.get("late", ""), open_.get("scheduled", ""),
]))
PY
}

# bench_wrk NAME CONNECTIONS SECONDS: wrk on the client core; prints requests, req/s,
# CPU µs/request, peak RSS MB, errors.
bench_wrk() {
  local name=$1 connections=$2 seconds=$3
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" \
    taskset -c "$client_cpu" wrk -t1 -c"$connections" -d"${seconds}s" "$url" >"$out/$name.txt"
  python3 - "$out/$name.txt" "$out/$name.time" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
n = int(re.search(r"(\d+) requests in", text).group(1))
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
errors = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
errors += int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", text)) else 0
user, system, rss_kb = open(sys.argv[2]).read().split()[-3:]
print(f"{n}\t{rps:.0f}\t{(float(user) + float(system)) / n * 1e6:.2f}\t{int(rss_kb) / 1024:.1f}\t{errors}")
PY
}

# bench_pairs CONNECTIONS SECONDS PAIRS LABEL: interleaved loadgen/wrk pairs; appends rows to
# $out/pairs.tsv and prints the medians and ratios.
bench_pairs() {
  local connections=$1 seconds=$2 pairs=$3 label=$4 i
  for i in $(seq "$pairs"); do
    printf '%s\tloadgen\t%s\n' "$label" "$(bench_loadgen "$label-loadgen-$i" -c "$connections" -d "${seconds}s" | cut -f1-5)" \
      | tee -a "$out/pairs.tsv" >&2
    printf '%s\twrk\t%s\n' "$label" "$(bench_wrk "$label-wrk-$i" "$connections" "$seconds")" \
      | tee -a "$out/pairs.tsv" >&2
  done
  bench_medians "$label" wrk
}

# bench_medians LABEL PEER: medians of $out/pairs.tsv's LABEL rows, loadgen against PEER, their
# ratios, and the median and range of the pairs' own ratios.
bench_medians() {
  python3 - "$out/pairs.tsv" "$1" "$2" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
label, peer = sys.argv[2], sys.argv[3]
rows = [r for r in rows if r[0] == label]
def med(tool, col):
    return statistics.median(float(r[col]) for r in rows if r[1] == tool)
print(f"\n{label}: medians of {sum(r[1] == peer for r in rows)} interleaved pairs")
print(f"{'':18}{'loadgen':>12}{peer:>12}{'loadgen/' + peer:>16}")
for col, name in [(3, "requests/s"), (4, "CPU µs/request"), (5, "peak RSS MB"), (6, "errors")]:
    a, b = med("loadgen", col), med(peer, col)
    ratio = f"{a / b:16.2f}" if b else f"{'—':>16}"
    print(f"{name:18}{a:12.2f}{b:12.2f}{ratio}")
# The k-th loadgen run and the k-th peer run are one pair: on a noisy machine the spread of the
# pairs' own ratios says how far the medians above can be trusted.
pairs = list(zip((r for r in rows if r[1] == "loadgen"), (r for r in rows if r[1] == peer)))
for col, name in [(3, "requests/s"), (4, "CPU µs/request")]:
    ratios = sorted(float(a[col]) / float(b[col]) for a, b in pairs if float(b[col]))
    if ratios:
        print(f"per-pair {name} ratios: median {statistics.median(ratios):.2f}, "
              f"{ratios[0]:.2f}–{ratios[-1]:.2f} over {len(ratios)} pairs")
PY
}

# The analysis venv at .venv, with the zoo's gunicorn: scripts/venv.sh, as the tests make it.
bench_venv() {
  VENV=.venv
  ./scripts/venv.sh
}

# Debian's nginx-light, for the zoo's and the testbeds' nginx rows, when it is not installed.
bench_nginx() {
  if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    echo "installing nginx-light from Debian's packages" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
  fi
}

# The paired benches' flags: -c CONNECTIONS, -d SECONDS, -r PAIRS (defaults 50, 10, 5);
# anything else prints the calling script's usage and exits 2.
bench_pair_flags() {
  connections=50
  seconds=10
  pairs=5
  local opt OPTIND
  while getopts "c:d:r:h" opt; do
    case $opt in
      c) connections=$OPTARG ;;
      d) seconds=$OPTARG ;;
      r) pairs=$OPTARG ;;
      *) sed -n '2,10p' "$0"; exit 2 ;;
    esac
  done
}
