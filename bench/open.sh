#!/usr/bin/env bash
# The open model at fixed arrival rates, against the peers that have a rate mode, over HTTP/1.1
# (nginx), HTTPS/1.1 and h2 (nginx with TLS, HTTP/2 enabled): target on core 0, clients on
# core 1, interleaved rounds, medians of the runs and of the rounds' own ratios.
#
#   loadgen open      --rate R: the open model, every request recorded; send lag from run.json
#   loadgen open 1ms  the same with --send-window 1ms: sends due within a millisecond share a
#                     wake-up, up to 1 ms late (how tools pacing on a 1 ms timer send)
#   vegeta            attack -rate R: an open model too (new workers when all are busy), every
#                     result recorded; send lag estimated from the results: the k-th send was
#                     due at start + (k+1)/R, the start taken from the run's least-late send
#   oha -q            -q R -c C --latency-correction: a rate-limited CLOSED pool of C
#                     connections, not an open model (a send waits for a free connection);
#                     its send lag is not exposed
#   loadgen closed    the baseline: -c N --think-time 1ms with N from a pilot run so that it
#                     runs at about R, and at its maximum (-c 50; h2: 4 connections x 50 streams)
#
# Per protocol and rate: achieved (OK responses over the duration) against offered req/s, client
# CPU (user + sys of the whole process) per OK response, send lag p50/p99/p99.9 where the tool
# exposes it, and the rounds' own ratios of loadgen's CPU per request to each peer's.
#
# usage: bench/open.sh [-r ROUNDS] [-d SECONDS] [-p PROTOCOLS] [-R RATES] [-H H2_RATES]
#   PROTOCOLS: a comma list of http1, https1, h2 (default: all three)
#   RATES: req/s for HTTP/1.1 and HTTPS/1.1 (default 5000,20000,50000); H2_RATES for h2
#   (default 5000,20000,50000)
# Installs nginx, wrk and GNU time from Debian's packages, and the peers, pinned, into
# bench/tools/ (not committed): vegeta built from the Go module proxy, oha from crates.io.
# LOADGEN=path benchmarks that binary. Leaves nothing running; raw results under bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

VEGETA_VERSION=v12.13.0
OHA_VERSION=1.16.0
tools=$PWD/bench/tools
vegeta=$tools/vegeta-$VEGETA_VERSION/vegeta
oha=$tools/oha-$OHA_VERSION/bin/oha

rounds=3
seconds=5
protocols=http1,https1,h2
rates=5000,20000,50000
h2_rates=5000,20000,50000
while getopts "r:d:p:R:H:h" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    d) seconds=$OPTARG ;;
    p) protocols=$OPTARG ;;
    R) rates=$OPTARG ;;
    H) h2_rates=$OPTARG ;;
    *) sed -n '2,26p' "$0"; exit 2 ;;
  esac
done
for protocol in ${protocols//,/ }; do
  case $protocol in
    http1|https1|h2) ;;
    *) echo "error: unknown protocol '$protocol' in -p (use http1, https1 or h2)" >&2; exit 2 ;;
  esac
done

install_peers() {
  if [ ! -x "$vegeta" ]; then
    echo "building vegeta $VEGETA_VERSION into $tools" >&2
    GOBIN=$(dirname "$vegeta") go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
  fi
  if [ ! -x "$oha" ]; then
    echo "building oha $OHA_VERSION into $tools" >&2
    cargo install oha --version "$OHA_VERSION" --locked --root "$(dirname "$(dirname "$oha")")"
  fi
}

# timed NAME COMMAND…: runs COMMAND on the client core under GNU time ($out/NAME.time).
timed() {
  local name=$1
  shift
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" taskset -c "$client_cpu" "$@"
}

# Every run prints one TSV row: OK responses, achieved req/s, CPU µs/request, send lag p50,
# p99, p99.9 in µs (empty when not exposed), failed or dropped.

# run_loadgen NAME ARGS…: a loadgen run; its send lag from run.json (summary.open.send_lag),
# or from the rows when the binary predates that field and pyarrow is importable.
run_loadgen() {
  local name=$1
  shift
  timed "$name" "${LOADGEN:-target/release/loadgen}" run --url "$url" --no-progress --json \
    --out "$out/$name" "$@" >"$out/$name.json"
  "${PYTHON:-python3}" - "$out/$name" "$seconds" <<'PY'
import json, sys
run, seconds = sys.argv[1], float(sys.argv[2])
summary = json.load(open(f"{run}.json"))["summary"]
user, system, _ = open(f"{run}.time").read().split()[-3:]
ok = summary["requests"] - summary["failed"]
open_ = summary.get("open") or {}
lag = open_.get("send_lag")
if lag:
    lag = [lag["p50_ns"], lag["p99_ns"], lag["p999_ns"]]
elif open_:
    try:
        import glob, pyarrow.parquet as pq
        rows = [pq.read_table(p, columns=["start_ns", "intended_ns"]) for p in glob.glob(f"{run}/requests/*.parquet")]
        lags = sorted(s - i for t in rows for s, i in zip(t["start_ns"].to_pylist(), t["intended_ns"].to_pylist()))
        lag = [lags[min(len(lags) - 1, int(q * len(lags)))] for q in (0.5, 0.99, 0.999)]
    except ImportError:
        lag = None
lags = [f"{x / 1e3:.0f}" for x in lag] if lag else ["", "", ""]
print("\t".join([str(ok), f"{ok / seconds:.0f}", f"{(float(user) + float(system)) / max(ok, 1) * 1e6:.2f}",
                 *lags, str(summary["failed"] + open_.get("dropped", 0))]))
PY
}

# run_vegeta NAME RATE HTTP2(true|false): vegeta at RATE, every result to $out/NAME.bin.
run_vegeta() {
  local name=$1 rate=$2 http2=$3
  echo "GET $url" >"$out/targets.txt"
  timed "$name" "$vegeta" attack -targets="$out/targets.txt" -rate="$rate/1s" -duration="${seconds}s" \
    -insecure -http2="$http2" -output="$out/$name.bin"
  "$vegeta" encode --to csv "$out/$name.bin" >"$out/$name.csv"
  python3 - "$out/$name" "$seconds" "$rate" <<'PY'
import csv, sys
run, seconds, rate = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
user, system, _ = open(f"{run}.time").read().split()[-3:]
# Columns: timestamp (unix ns), code, latency, bytes out, bytes in, error, body, attack, seq, …
rows = [(int(r[0]), int(r[1]), int(r[8])) for r in csv.reader(open(f"{run}.csv"))]
ok = sum(code == 200 for _, code, _ in rows)
interval = 1e9 / rate
due = [ts - (seq + 1) * interval for ts, _, seq in rows]
start = min(due)
lags = sorted(d - start for d in due)
lag = [f"{lags[min(len(lags) - 1, int(q * len(lags)))] / 1e3:.0f}" for q in (0.5, 0.99, 0.999)] if lags else ["", "", ""]
print("\t".join([str(ok), f"{ok / seconds:.0f}", f"{(float(user) + float(system)) / max(ok, 1) * 1e6:.2f}",
                 *lag, str(len(rows) - ok)]))
PY
  rm -f "$out/$name.csv"
}

# run_oha NAME RATE ARGS…: oha's rate-limited pool at RATE.
run_oha() {
  local name=$1 rate=$2
  shift 2
  timed "$name" "$oha" "$url" -z "${seconds}s" -q "$rate" --latency-correction --no-tui \
    --output-format json --insecure "$@" >"$out/$name.json"
  python3 - "$out/$name" "$seconds" <<'PY'
import json, sys
run, seconds = sys.argv[1], float(sys.argv[2])
report = json.load(open(f"{run}.json"))
user, system, _ = open(f"{run}.time").read().split()[-3:]
codes = report.get("statusCodeDistribution", {})
ok = int(codes.get("200", 0))
# Requests still in flight when -z ends are "aborted due to deadline": not failures.
errors = {k: v for k, v in report.get("errorDistribution", {}).items() if k != "aborted due to deadline"}
failed = sum(int(n) for c, n in codes.items() if c != "200") + sum(errors.values())
print("\t".join([str(ok), f"{ok / seconds:.0f}", f"{(float(user) + float(system)) / max(ok, 1) * 1e6:.2f}",
                 "", "", "", str(failed)]))
PY
}

# Protocol-specific arguments: loadgen's open run, its closed run with N workers, oha's pool,
# vegeta's HTTP/2 switch.
open_args() {
  case $1 in
    h2) echo "${loadgen_tls[*]} --http2 --streams-per-connection 50 --max-in-flight 200" ;;
    *) echo "${loadgen_tls[*]}" ;;
  esac
}
closed_args() {
  local protocol=$1 workers=$2
  case $protocol in
    h2)
      local connections=$(((workers + 49) / 50))
      echo "${loadgen_tls[*]} --http2 -c $connections --streams-per-connection $(((workers + connections - 1) / connections))" ;;
    *) echo "${loadgen_tls[*]} -c $workers" ;;
  esac
}
oha_args() {
  case $1 in
    h2) echo "--http2 -c 2 -p 50" ;;
    *) echo "-c 100" ;;
  esac
}

# pilot PROTOCOL: req/s one closed worker with 1 ms of think time reaches (from 20 workers).
pilot() {
  local row
  # shellcheck disable=SC2046
  row=$(run_loadgen "$1-pilot" $(closed_args "$1" 20) --think-time 1ms -d "${seconds}s")
  python3 -c "print(float('$(cut -f2 <<<"$row")') / 20)"
}

# next_workers WORKERS RATE ROW: the closed worker count for the next round, scaled by how far
# this round's run (ROW) was from RATE.
next_workers() {
  python3 -c "print(max(1, round($1 * $2 / max(float('$(cut -f2 <<<"$3")'), 1))))"
}

# bench_protocol PROTOCOL RATES: the rounds for one protocol; rows to $results as
# protocol, rate, tool, round, then the run's row.
bench_protocol() {
  local protocol=$1 rates=$2 per_worker round rate row http2=false
  local -A workers=()
  [ "$protocol" = h2 ] && http2=true
  per_worker=$(pilot "$protocol")
  echo "$protocol: a closed worker with 1 ms think time: $per_worker req/s" >&2
  for rate in ${rates//,/ }; do
    workers[$rate]=$(python3 -c "print(max(1, round($rate / $per_worker)))")
  done
  for round in $(seq "$rounds"); do
    for rate in ${rates//,/ }; do
      local tag="$protocol-$rate-$round"
      # shellcheck disable=SC2046
      {
        printf '%s\t%s\tloadgen-open\t%s\t%s\n' "$protocol" "$rate" "$round" \
          "$(run_loadgen "$tag-open" $(open_args "$protocol") --rate "$rate" -d "${seconds}s")"
        printf '%s\t%s\tloadgen-open-1ms\t%s\t%s\n' "$protocol" "$rate" "$round" \
          "$(run_loadgen "$tag-open-1ms" $(open_args "$protocol") --rate "$rate" -d "${seconds}s" --send-window 1ms)"
        printf '%s\t%s\tvegeta\t%s\t%s\n' "$protocol" "$rate" "$round" "$(run_vegeta "$tag-vegeta" "$rate" "$http2")"
        printf '%s\t%s\toha-q\t%s\t%s\n' "$protocol" "$rate" "$round" \
          "$(run_oha "$tag-oha" "$rate" $(oha_args "$protocol"))"
      } | tee -a "$results" >&2
      # shellcheck disable=SC2046
      row=$(run_loadgen "$tag-closed" $(closed_args "$protocol" "${workers[$rate]}") --think-time 1ms -d "${seconds}s")
      printf '%s\t%s\tloadgen-closed\t%s\t%s\n' "$protocol" "$rate" "$round" "$row" | tee -a "$results" >&2
      workers[$rate]=$(next_workers "${workers[$rate]}" "$rate" "$row")
    done
    local max_workers=50
    [ "$protocol" = h2 ] && max_workers=200
    # shellcheck disable=SC2046
    printf '%s\tmax\tloadgen-closed\t%s\t%s\n' "$protocol" "$round" \
      "$(run_loadgen "$protocol-max-$round" $(closed_args "$protocol" "$max_workers") -d "${seconds}s")" \
      | tee -a "$results" >&2
  done
}

install_peers
mkdir -p bench/out
results=$PWD/bench/out/$(date -u +%Y%m%dT%H%M%SZ)-open.tsv
report=$(mktemp)
for protocol in ${protocols//,/ }; do
  case $protocol in
    http1) bench_setup nginx ;;
    *) bench_setup nginx-tls ;;
  esac
  protocol_rates=$rates
  [ "$protocol" = h2 ] && protocol_rates=$h2_rates
  bench_protocol "$protocol" "$protocol_rates"
  bench_cleanup
done

python3 - "$results" <<'PY' | tee "$report"
import collections, statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
runs = collections.defaultdict(dict)  # (protocol, rate) -> tool -> round -> row
for protocol, rate, tool, round_, *row in rows:
    runs[(protocol, rate)].setdefault(tool, {})[round_] = row
def med(values):
    values = [float(v) for v in values if v != ""]
    return statistics.median(values) if values else None
def fmt(x, spec=".0f"):
    return "—" if x is None else format(x, spec)
print("| protocol | offered req/s | tool | achieved req/s | achieved/offered | CPU µs/req | send lag p50 / p99 / p99.9 µs | failed+dropped |")
print("|---|---|---|---|---|---|---|---|")
for (protocol, rate), tools in runs.items():
    for tool, by_round in tools.items():
        cols = list(zip(*by_round.values()))
        achieved = med(cols[1])
        ratio = "—" if rate == "max" else f"{achieved / float(rate):.3f}"
        lag = " / ".join(fmt(med(cols[i])) for i in (3, 4, 5))
        print(f"| {protocol} | {rate} | {tool} | {fmt(achieved)} | {ratio} | {fmt(med(cols[2]), '.2f')} | {lag} | {fmt(med(cols[6]))} |")
print()
print("loadgen open's CPU per request (exact sends; with --send-window 1ms) over each peer's: median of the rounds' own ratios (range)")
maxes = {p: by for (p, r), t in runs.items() if r == "max" for by in [t["loadgen-closed"]]}
for (protocol, rate), tools in runs.items():
    if rate == "max":
        continue
    peers = [(t, tools[t]) for t in ("vegeta", "oha-q", "loadgen-closed") if t in tools]
    peers.append(("closed at max", maxes.get(protocol, {})))
    for variant in ("loadgen-open", "loadgen-open-1ms"):
        mine = tools.get(variant, {})
        parts = []
        for name, theirs in peers:
            ratios = sorted(float(mine[r][2]) / float(theirs[r][2]) for r in mine if r in theirs and float(theirs[r][2]))
            if ratios:
                parts.append(f"{name} {statistics.median(ratios):.2f} ({ratios[0]:.2f}–{ratios[-1]:.2f})")
        print(f"{protocol} at {rate}/s, {variant}: " + ", ".join(parts))
PY

printf '\n==== summary (%s, %s, %s cores, load average %s) ====\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  "$(uname -r)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
cat "$report"
rm -f "$report"
