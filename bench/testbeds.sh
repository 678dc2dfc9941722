#!/usr/bin/env bash
# Testbeds with a known truth, judged by the analysis: a server of known capacity (a sweep
# 1…64), a client in a quarter-core CPU quota, uploads over a 200 Mbit/s tc-shaped link (25 KB
# and 2 KB images), think time, 10 % errors, the embedded demo and the zoo of servers the
# project did not write (bench/zoo.sh has its grades). Records each with the release binaries,
# runs `loadgen-analyze explain --json` on it and prints a Markdown table
# (testbed | truth | verdict | the evidence that decided it | right?). Exit 0 when every verdict
# is right.
#
# Needs root for the cgroup and the network namespace (those rows say "skipped" otherwise);
# installs iproute2 (ip, tc) if missing and the analysis venv (.venv, from
# analysis/requirements.lock). The runs stay in bench/out/<time>-testbeds/. ~2 min plus the
# build.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tc >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
  echo "installing iproute2 (ip, tc) from Debian's packages" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi

# The analysis venv, with the zoo's gunicorn (bench/lib.sh).
source bench/lib.sh
bench_nginx
bench_venv

cargo build --release --locked -p loadgen -p loadgen-servers >&2

out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-testbeds"
mkdir -p "$out"
echo "runs in $out; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
LOADGEN_BIN=target/release/loadgen LOADGEN_SERVER_BIN=target/release/loadgen-server \
  "$VENV/bin/python" -m loadgen_analysis.testing.testbed_table --out "$out" | tee "$out/table.md"
