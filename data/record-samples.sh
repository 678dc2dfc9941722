#!/usr/bin/env bash
# Records the sample runs in data/runs/ against loadgen-server on 127.0.0.1, exactly as
# data/README.md lists them. Rerun it only when the record schema changes: the samples are
# meant to stay fixed so the notebooks and their figures do not drift.
# `data/record-samples.sh courses` records only data/runs/courses/ (docs/courses.md's samples);
# `data/record-samples.sh capacity` only data/runs/capacity-w8-10ms (notebook 02's search).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p loadgen -p loadgen-servers >&2
L=target/release/loadgen
S=target/release/loadgen-server
log=$(mktemp)
server_pid=
stop_server() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; server_pid=; }
trap stop_server EXIT
start_server() {
  stop_server
  "$S" --port 0 "$@" >"$log" 2>/dev/null &
  server_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.05; done
  url=$(grep -o 'http://[0-9.:]*' "$log" | head -1)
}

# docs/courses.md: one small sample per course experiment, each scaled down (and said so).
record_courses() {
  local c=data/runs/courses
  rm -rf "$c"
  mkdir -p "$c/image-size"
  start_server --service-time exp:2ms
  # (1) thread groups: startup 10 × 10, then 3 groups of 10 workers 1 s apart, 100 iterations
  "$L" run --scenario albums --set model.startup.iterations=10 --set model.groups=3 \
    --set model.group_size=10 --set model.delay=1s --set model.iterations=100 \
    --url "$url" --no-progress --out "$c/thread-groups"
  # (2) image size: the same client with a 2 KB and a 25 KB image, 30 workers in all
  for size in 2KB 25KB; do
    "$L" run --scenario albums --set model.startup.iterations=10 --set model.groups=2 \
      --set model.group_size=10 --set model.delay=500ms --set model.iterations=50 \
      --set "requests.new_album.multipart.image.bytes=$size" \
      --url "$url" --no-progress --out "$c/image-size/$size"
  done
  # (5) StepCounter: 16 max workers (1 / 8 / 16 / 4), 8 iterations per time interval
  "$L" run --scenario stepcounter --set model.max_workers=16 --set model.iterations_per_step=8 \
    --url "$url" --no-progress --out "$c/stepcounter"
  # (3) Twinder calibration and sweep against a server with a capacity (8 × 10 ms = 800 req/s)
  start_server --workers 8 --service-time 10ms
  "$L" calibrate --scenario twinder -n 2000 --warmup 100 --levels 20,50,100,150,200 \
    --url "$url" --no-progress --out "$c/twinder-calibration"
  "$L" sweep --scenario twinder --levels 20,50,100,200 -n 1000 \
    --calibration "$c/twinder-calibration" --url "$url" --no-progress --out "$c/twinder-sweep"
  # (4) SkierClient: 4,000 lift rides, 32 consumers × 50 growing to 200, 5 retries, 2 % errors
  start_server --workers 8 --service-time 10ms --error-rate 0.02
  "$L" calibrate --scenario skiers -n 1000 --warmup 100 --levels 32,64,128,200 \
    --url "$url" --no-progress --out "$c/skiers-calibration"
  "$L" run --scenario skiers --set model.total=4000 --set model.requests_per_worker=50 \
    --url "$url" --no-progress --out "$c/skiers"
}
# Notebook 02's capacity section: the search against 8 workers × 10 ms, short levels.
record_capacity() {
  rm -rf data/runs/capacity-w8-10ms
  start_server --workers 8 --service-time 10ms
  "$L" capacity --url "$url/" --slo 'p99<50ms' --level-duration 2s --warmup 500ms \
    --cool-down 300ms --tolerance 10% --confirm-levels 2 --no-progress \
    --out data/runs/capacity-w8-10ms
}
if [ "${1:-}" = capacity ]; then
  record_capacity
  du -sh data/runs/capacity-w8-10ms
  exit 0
fi
if [ "${1:-}" = courses ]; then
  record_courses
  du -sh data/runs/courses/*
  exit 0
fi

rm -rf data/runs
mkdir -p data/runs/regression

start_server --service-time exp:2ms
# The built-in StepCounter client at 16 max workers, 8 iterations per time interval, scraping
# the server's own /metrics (its gauges: the report draws them, the verdict reads them).
"$L" run --scenario stepcounter --set model.max_workers=16 --set model.iterations_per_step=8 \
  --url "$url" --server-metrics "$url/metrics" --no-progress --out data/runs/overview

start_server --workers 8 --service-time 10ms
"$L" sweep --url "$url/" --levels 1,2,4,8,16,32 -d 1500ms --no-progress --out data/runs/sweep-w8-10ms
"$L" run --url "$url/" -c 8 --think-time 30ms -d 2s --no-progress --out data/runs/think-time

start_server --service-time 5ms
for r in 1 2 3; do
  "$L" run --url "$url/" -c 8 -d 1s --no-progress --out "data/runs/regression/baseline-5ms/r$r"
done
start_server --service-time 8ms
for r in 1 2 3; do
  "$L" run --url "$url/" -c 8 -d 1s --no-progress --out "data/runs/regression/candidate-8ms/r$r"
done
record_courses
record_capacity
du -sh data/runs
