#!/usr/bin/env bash
# Runs every check and test of the project: the README's test command, and all that .ci/run does.
# Installs what it needs (rustfmt, clippy, a Python venv with the pinned analysis packages) on
# a fresh machine with Rust and Python.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it began, counted from the start of the whole test command.
export LOADGEN_TESTS_STARTED_S=${LOADGEN_TESTS_STARTED_S:-$(date +%s)}
step() {
  local at_s=$(($(date +%s) - LOADGEN_TESTS_STARTED_S))
  printf '\n==> %s  (at %dm%02ds)\n' "$*" $((at_s / 60)) $((at_s % 60))
}

if command -v rustup >/dev/null 2>&1; then
  installed=$(rustup component list --installed 2>/dev/null || true)
  for component in rustfmt clippy; do
    grep -q "^${component}" <<<"$installed" || rustup component add "$component"
  done
fi

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "Prometheus (loadgen/tests/prometheus.rs scrapes a real run with it)"
if command -v prometheus >/dev/null 2>&1; then
  echo "found $(command -v prometheus)"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq prometheus >/dev/null) \
    || echo "could not install Debian's prometheus package: that test will say it skipped"
else
  echo "prometheus is missing and needs apt-get as root to install: that test will say it skipped"
fi

step "node_exporter (loadgen/tests/server_metrics.rs scrapes a real one during runs)"
if command -v prometheus-node-exporter >/dev/null 2>&1; then
  echo "found $(command -v prometheus-node-exporter)"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq prometheus-node-exporter >/dev/null) \
    || echo "could not install Debian's prometheus-node-exporter package: those tests will say they skipped"
else
  echo "prometheus-node-exporter is missing and needs apt-get as root to install: those tests will say they skipped"
fi

step "nginx (analysis/tests/test_zoo.py starts Debian's nginx as a zoo server)"
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
  echo "found nginx"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null) \
    || echo "could not install Debian's nginx-light package: the zoo's nginx rows will say they skipped"
else
  echo "nginx is missing and needs apt-get as root to install: the zoo's nginx rows will say they skipped"
fi

step "cargo test"
cargo test --workspace --locked

step "MSRV: the workspace builds with the Rust it declares"
./scripts/msrv.sh

step "cargo build (debug binaries for the Python tests)"
cargo build --workspace --locked

./scripts/test-python.sh
