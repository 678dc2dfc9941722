#!/usr/bin/env bash
# Many connections from one client (docs/reference/performance.md, "Many connections"): loadgen
# (every request recorded) against wrk at 1,000, 10,000 and 50,000 keep-alive connections —
# requests/s, client CPU per request, peak RSS and RSS per added connection (the slope from
# 1,000 to 10,000) —, then 100,000 users of a closed model with ~10 s think time held for at
# least 60 s: rows against nginx's access-log count, error rows, peak RSS, the verdict.
#
# usage: bench/connections.sh [-d SECONDS] [-r PAIRS] [-u USERS] [-t HOLD_SECONDS] [-s]
#   -d  length of each comparison run (default 10)     -u  users of the long run (100000; 0: none)
#   -r  interleaved loadgen/wrk pairs per count (1)    -t  length of the long run (default 70)
#   -s  skip the comparison runs
#
# nginx on core 0 (workers with `reuseport`, each under this machine's open-files limit), the
# clients on core 1. A process here may hold 20,000 files and no more, so above ~19,900
# connections the one `loadgen run` command spreads its workers over several processes of
# itself (one shard each, loopback source addresses 127.0.0.x so that no (source, destination)
# pair runs out of ephemeral ports, one run directory); their CPU is counted together (the
# run waits for them) and their RSS summed (sampled from /proc). wrk has neither: it runs
# where one process can hold the count.
# LEVELS="1000 10000" chooses the comparison counts; LOADGEN=path benchmarks that binary;
# BEFORE=path adds that loadgen binary to every pair (before, loadgen, wrk in turn), for an
# A/B of two builds against wrk in one run. With -r the medians of the runs and of the pairs'
# own ratios are printed (CPU per request and peak RSS, loadgen / wrk and loadgen / before).
# Installs wrk and nginx from Debian's packages if missing; leaves nothing running; raw results
# under bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

seconds=10
pairs=1
users=100000
hold=70
compare=1
while getopts "d:r:u:t:sh" opt; do
  case $opt in
    d) seconds=$OPTARG ;;
    r) pairs=$OPTARG ;;
    u) users=$OPTARG ;;
    t) hold=$OPTARG ;;
    s) compare=0 ;;
    *) sed -n '2,24p' "$0"; exit 2 ;;
  esac
done

bench_install nginx
[ -n "${LOADGEN:-}" ] || cargo build --release --locked -p loadgen >&2
loadgen=${LOADGEN:-target/release/loadgen}
if [ "$(nproc)" -ge 2 ]; then server_cpu=0; client_cpu=1; else server_cpu=0; client_cpu=0; fi
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-connections"
mkdir -p "$out"
ulimit -n "$(ulimit -Hn)" || true
files=$(ulimit -n)
# Connections one loadgen process holds: its files, less headroom for the runtime and stdio.
per_process=$((files - 100))
report="$out/report.txt"
note() { printf '%s\n' "$*" | tee -a "$report" >&2; }

# start_nginx WORKERS LOG: nginx on the server core, WORKERS processes sharing the port with
# reuseport, each allowed its share of connections; LOG=on writes an access log.
start_nginx() {
  local workers=$1 log=$2 port nginx_bin
  bench_cleanup
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$out/nginx"
  rm -f "$out/nginx/access.log"
  local access="access_log off;"
  [ "$log" = on ] && access="access_log $PWD/$out/nginx/access.log combined buffer=256k flush=1s;"
  cat >"$out/nginx/nginx.conf" <<CONF
worker_processes $workers;
worker_rlimit_nofile $files;
daemon off;
pid $PWD/$out/nginx/nginx.pid;
error_log $PWD/$out/nginx/error.log;
events { worker_connections $((files - 100)); }
http {
  $access
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  server {
    listen 127.0.0.1:$port reuseport backlog=65535;
    location /probe { access_log off; return 200 "ok\n"; }
    location / { return 200 "hello, world\n"; }
  }
}
CONF
  nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
  taskset -c "$server_cpu" "$nginx_bin" -c "$PWD/$out/nginx/nginx.conf" -p "$PWD/$out/nginx" &
  bench_pids+=($!)
  url="http://127.0.0.1:$port/"
  for _ in $(seq 100); do curl -fs "${url}probe" >/dev/null 2>&1 && break; sleep 0.1; done
}

# run_loadgen NAME CONNECTIONS ARGS…: one `loadgen run` with CONNECTIONS workers on the client
# core (past one process's open files it spreads itself over several); prints requests, req/s,
# CPU µs/request (the processes' together), peak RSS MB (of all of them together, sampled from
# /proc every 0.2 s), failed, processes, verdict(s), errors by class.
run_loadgen() {
  local name=$1 connections=$2 pid
  shift 2
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" \
    taskset -c "$client_cpu" "${binary:-$loadgen}" run --url "$url" --no-progress --json \
    --out "$out/$name" -c "$connections" "$@" >"$out/$name.json" 2>"$out/$name.err" &
  pid=$!
  peak_rss_kb "$pid" >"$out/$name.rss"
  wait "$pid" || true
  python3 - "$out" "$name" <<'PY'
import json, sys
out, name = sys.argv[1], sys.argv[2]
doc = json.load(open(f"{out}/{name}.json"))
user, system, rss_kb = open(f"{out}/{name}.time").read().split()[-3:]
# One process: its own peak (as wrk's is measured); spread: the sampled sum of the processes.
# A spread run's document is the run as one (the processes' aggregates merged, one verdict).
rss = int(rss_kb) / 1024
summary = doc["summary"]
n, failed, rps = summary["requests"], summary["failed"], summary["throughput_rps"]
classes = summary.get("errors") or {}
processes = (doc.get("spread") or {}).get("processes", 1)
if processes > 1:
    rss = int(open(f"{out}/{name}.rss").read().split()[0]) / 1024
verdicts = [str((doc.get("verdict") or {}).get("summary") or "")[:160]]
cpu = float(user) + float(system)
errors = ", ".join(f"{c} {k}" for c, k in sorted(classes.items())) or "none"
print("\t".join(str(x) for x in [n, f"{rps:.0f}", f"{cpu / max(n, 1) * 1e6:.2f}", f"{rss:.1f}", failed, processes, " | ".join(verdicts), errors]))
PY
}

# peak_rss_kb PID: the largest sum of the resident sets of PID's process tree (the loadgen run
# and the processes it spread over), sampled every 0.2 s until PID ends.
peak_rss_kb() {
  local root=$1 peak=0 total pids
  while kill -0 "$root" 2>/dev/null; do
    # The run's children (loadgen under taskset) and theirs (the processes it spread over).
    pids=$( { ps -o pid= --ppid "$root" | xargs -r -n1 ps -o pid= --ppid; ps -o pid= --ppid "$root"; } 2>/dev/null || true)
    total=$(echo "$root" $pids | tr -s ' ' ',' | xargs ps -o rss= -p 2>/dev/null | awk '{s += $1} END {print s + 0}') || true
    if [ "$total" -gt "$peak" ]; then peak=$total; fi
    sleep 0.2
  done
  echo "$peak"
}

# run_wrk NAME CONNECTIONS SECONDS: prints requests, req/s, CPU µs/request, peak RSS MB, errors.
run_wrk() {
  bench_wrk "$@"
}

if [ "$compare" = 1 ]; then
  note "== loadgen vs wrk, ${seconds}s each, nginx with 4 workers (reuseport) on core $server_cpu"
  start_nginx 4 off
  out_dir=$out
  printf 'connections\tclient\trequests\treq/s\tCPU µs/req\tpeak RSS MB\terrors\tpair\n' >"$out/compare.tsv"
  clients=(loadgen)
  [ -n "${BEFORE:-}" ] && clients=(before loadgen)
  for c in ${LEVELS:-1000 10000 50000}; do
    for i in $(seq "$pairs"); do
      for client in "${clients[@]}"; do
        binary=$loadgen
        [ "$client" = before ] && binary=$BEFORE
        IFS=$'\t' read -r n rps cpu rss failed processes _ <<<"$(run_loadgen "$client-c$c-$i" "$c" -d "${seconds}s" --connect-timeout 30s)"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$client" "$n" "$rps" "$cpu" "$rss" "$failed" "$i" | tee -a "$out/compare.tsv" >&2
        [ "$processes" -gt 1 ] && note "$client at $c connections: spread itself over $processes processes (one command), RSS and CPU summed"
      done
      binary=
      if [ "$c" -le "$per_process" ]; then
        out=$out_dir
        row=$(run_wrk "wrk-c$c-$i" "$c" "$seconds")
        printf '%s\twrk\t%s\t%s\n' "$c" "$row" "$i" | tee -a "$out/compare.tsv" >&2
      elif [ "$i" = 1 ]; then
        note "wrk at $c connections: not run (one process holds at most $files files here, and wrk has no shards or source addresses)"
      fi
    done
  done
  python3 - "$out/compare.tsv" <<'PY' | tee -a "$report" >&2
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
counts = list(dict.fromkeys(r[0] for r in rows))
tools = list(dict.fromkeys(r[1] for r in rows))
def runs(c, tool):
    return [r for r in rows if r[0] == c and r[1] == tool]
def med(c, tool, col):
    values = [float(r[col]) for r in runs(c, tool)]
    return statistics.median(values) if values else None
pairs = max(int(r[7]) for r in rows)
print(f"medians of {pairs} interleaved run(s) per client and count")
print(f"{'connections':>12}{'client':>9}{'req/s':>10}{'CPU µs/req':>12}{'peak RSS MB':>13}{'errors':>8}")
for c in counts:
    for tool in tools:
        if runs(c, tool):
            print(f"{c:>12}{tool:>9}{med(c, tool, 3):>10.0f}{med(c, tool, 4):>12.2f}{med(c, tool, 5):>13.1f}"
                  f"{sum(int(r[6]) for r in runs(c, tool)):>8}")
# The i-th runs of one count are a pair (run one after the other): the spread of the pairs' own
# ratios says how far the medians can be trusted on a busy machine.
for c in counts:
    for a, b in [("loadgen", "wrk"), ("before", "wrk"), ("loadgen", "before")]:
        by_pair = {r[7]: r for r in runs(c, b)}
        both = [(r, by_pair[r[7]]) for r in runs(c, a) if r[7] in by_pair]
        if not both:
            continue
        for col, name in [(4, "CPU per request"), (5, "peak RSS")]:
            ratios = sorted(float(x[col]) / float(y[col]) for x, y in both)
            print(f"{c:>6} connections, {a}/{b} {name}: median {statistics.median(ratios):.2f} "
                  f"({ratios[0]:.2f}–{ratios[-1]:.2f} over {len(ratios)} pairs)")
for tool in tools:
    a, b = med("1000", tool, 5), med("10000", tool, 5)
    if a is not None and b is not None:
        print(f"{tool}: RSS per added connection (1,000 → 10,000, medians): {(b - a) * 1024 / 9000:.2f} KB")
PY
fi

if [ "$users" = 0 ]; then cat "$report"; exit 0; fi
workers=$(((users + per_process - 1) / per_process + 1))
note "== $users users, closed model, 10 s think time, ${hold}s, nginx with $workers workers (reuseport, access log on)"
# Opening 100,000 connections is a burst of SYNs on one nginx core: the listen queues are
# raised for this run (somaxconn caps nginx's `backlog` when nginx calls listen(), so before
# it starts; the SYN queue holds half-open ones) and put back after it; one connect rate for
# the run (loadgen shares it among its processes).
connect_rate=${CONNECT_RATE:-5000}
saved_sysctl=$(sysctl -n net.core.somaxconn net.ipv4.tcp_max_syn_backlog | tr '\n' ' ')
restore_sysctl() {
  read -r somaxconn syn_backlog <<<"$saved_sysctl"
  sysctl -qw net.core.somaxconn="$somaxconn" net.ipv4.tcp_max_syn_backlog="$syn_backlog" || true
}
trap 'bench_cleanup; restore_sysctl' EXIT
sysctl -qw net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535 ||
  note "cannot raise somaxconn / tcp_max_syn_backlog here: the listen queues stay at $saved_sysctl"
start_nginx "$workers" on
port=${url##*:}
note "nginx listen backlog: $(ss -lnt "sport = :${port%/}" | awk 'NR==2 {print $3}')"
IFS=$'\t' read -r n rps cpu rss failed processes verdicts errors <<<"$(run_loadgen users "$users" --think-time 10s -d "${hold}s" --connect-timeout 30s --connect-rate "${connect_rate}/s")"
bench_cleanup
sleep 1
logged=$(wc -l <"$out/nginx/access.log")
note "one loadgen run: rows $n (in $processes processes), nginx access log $logged, error rows $failed, $rps req/s, peak RSS $rss MB (summed), CPU $cpu µs/request"
note "verdicts: $verdicts"
note "error rows by class: $errors"
if [ "$n" = "$logged" ] && [ "$failed" = 0 ]; then note "rows = nginx's count, no error rows"; else note "MISMATCH: rows $n vs nginx $logged, $failed error rows"; fi

printf '\n==== summary (%s, %s, %s cores) ====\n' "$(date -u +%Y-%m-%d)" "$(uname -r)" "$(nproc)"
cat "$report"
