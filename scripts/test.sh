#!/usr/bin/env bash
# Runs every check and test of the project: the README's test command, and all that .ci/run does.
# Installs what it needs (rustfmt, clippy, Debian's tools the tests start, a Python venv with
# the pinned analysis packages) on a fresh machine with Rust and Python.
#
# Tests hold behaviour; measurements of this machine are benches (bench/, not run here):
# docs/contributing.md says which is which, and the quick loop for one who edits.
# Everything is compiled once: `cargo test` builds the debug binaries the Python tests run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it began, counted from the start of the whole test command.
export LOADGEN_TESTS_STARTED_S=${LOADGEN_TESTS_STARTED_S:-$(date +%s)}
step() {
  local at_s=$(($(date +%s) - LOADGEN_TESTS_STARTED_S))
  printf '\n==> %s  (at %dm%02ds)\n' "$*" $((at_s / 60)) $((at_s % 60))
}

mkdir -p target
# Every skipped test of both languages, with its reason, listed at the end (a failure too).
export LOADGEN_TEST_SKIPS="$PWD/target/test-skips.txt"
: >"$LOADGEN_TEST_SKIPS"
kill_tree() {
  local child
  for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
list_skips() {
  local status=$?
  # A failure ends the command: nothing started beside it goes on running.
  local pid
  for pid in $(jobs -p); do kill_tree "$pid"; done
  step "skipped tests"
  if [ -s "$LOADGEN_TEST_SKIPS" ]; then
    sort "$LOADGEN_TEST_SKIPS"
    echo "$(wc -l <"$LOADGEN_TEST_SKIPS") skipped: what they need could not be installed here"
  else
    echo "none"
  fi
  return "$status"
}
trap list_skips EXIT

if command -v rustup >/dev/null 2>&1; then
  installed=$(rustup component list --installed 2>/dev/null || true)
  for component in rustfmt clippy; do
    grep -q "^${component}" <<<"$installed" || rustup component add "$component"
  done
fi

step "started beside the build: the tools the tests use (scripts/test-tools.sh), the Python venv (scripts/venv.sh), the MSRV toolchain"
./scripts/test-tools.sh target/test-unavailable >target/test-tools.log 2>&1 &
tools_pid=$!
./scripts/venv.sh >target/venv.log 2>&1 &
venv_pid=$!
./scripts/msrv.sh --install >target/msrv-install.log 2>&1 &
msrv_install_pid=$!

step "cargo fmt --check"
cargo fmt --all --check

step "cargo test: build (also the debug binaries the Python tests run)"
cargo test --workspace --locked --no-run

# Clippy, the docs and the MSRV check compile nothing the tests run: they go beside the tests at
# the lowest priority (most of a test's time is a real run's fixed duration, so a core is often
# idle), in a target directory of their own (a running `cargo test` holds target/'s lock).
step "started beside the tests, at low priority: cargo clippy, cargo doc, the MSRV check (target/lint)"
(
  export CARGO_TARGET_DIR="$PWD/target/lint"
  set -x
  nice -n 19 cargo clippy --workspace --all-targets --locked -- -D warnings
  RUSTDOCFLAGS="-D warnings" nice -n 19 cargo doc --workspace --no-deps --locked
  while kill -0 "$msrv_install_pid" 2>/dev/null; do sleep 1; done # the toolchain's download
  nice -n 19 ./scripts/msrv.sh
) >target/lint.log 2>&1 &
lint_pid=$!

step "the tools the tests use"
wait "$tools_pid" || true
cat target/test-tools.log
LOADGEN_TEST_UNAVAILABLE=$(paste -sd, target/test-unavailable)
export LOADGEN_TEST_UNAVAILABLE
[ -z "$LOADGEN_TEST_UNAVAILABLE" ] || echo "their tests will be skipped: $LOADGEN_TEST_UNAVAILABLE"

step "cargo test"
cargo test --workspace --locked --no-fail-fast

step "python venv (made beside the build)"
if ! wait "$venv_pid"; then
  cat target/venv.log
  exit 1
fi
cat target/venv.log

LOADGEN_PYTHON_PREPARED=1 ./scripts/test-python.sh

step "cargo clippy and cargo doc (warnings are errors), the MSRV check: run beside the tests"
lint_status=0
wait "$lint_pid" || lint_status=$?
grep -v '^ *\(Compiling\|Checking\|Documenting\) ' target/lint.log || true
exit "$lint_status"
