#!/usr/bin/env bash
# The zoo (issue 44): servers the project did not write — nginx (static, limit_req 429 and 503
# with Retry-After, a reverse proxy with a keep-alive pool of 2), CPython's ThreadingHTTPServer
# (GIL-bound CPU), gunicorn's sync workers (CPU- and sleep-bound), Node's http, the JDK's
# HttpServer (fixed pool, Nagle on), Go's net/http (a semaphore; headers flushed before the
# body, chunked, Connection: close under load, a full accept backlog) — every row in every mode
# it runs (closed level, open rate, sweep, capacity search), recorded with the release
# binaries, judged by `loadgen-analyze explain --json` and printed as a Markdown table (row ×
# mode | truth | verdict | rule | evidence | the server's own count | grade), grade being
# right / inconclusive / weak-wrong / STRONG-WRONG. Exit 0 when no row is wrong.
#
# Installs nginx-light (Debian) when missing and the analysis venv with gunicorn from
# analysis/zoo.lock; node, java/javac and go must be on the PATH (their rows skip otherwise;
# the Go and Java handlers are compiled into target/zoo/ once). `--quick` runs only the quick rows
# (analysis/tests/test_zoo.py runs seven of them, zoo_testbeds.TESTED); `--only TEXT` the rows whose name contains TEXT. The runs
# stay in bench/out/<time>-zoo/. ~4 min plus the build. BURNERS=N keeps N steady CPU burners
# (each a busy loop) running beside the rows, for the table measured "beside burners".
set -euo pipefail
cd "$(dirname "$0")/.."


# The analysis venv, with the zoo's gunicorn (bench/lib.sh).
source bench/lib.sh
bench_nginx
bench_venv

cargo build --release --locked -p loadgen -p loadgen-servers >&2

out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-zoo"
mkdir -p "$out"
for _ in $(seq "${BURNERS:-0}"); do
  python3 -c 'while True: pass' &
  bench_pids+=($!) # stopped on exit by bench/lib.sh
done
echo "runs in $out; $(nproc) cores, ${BURNERS:-0} burners, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
LOADGEN_BIN=target/release/loadgen LOADGEN_SERVER_BIN=target/release/loadgen-server \
  "$VENV/bin/python" -m loadgen_analysis.testing.zoo_testbeds --out "$out" "$@" \
  | tee "$out/table.md"
