#!/usr/bin/env bash
# The quick loop for one who edits: the Rust unit tests (`--lib`, no process started) and the
# Python tests that start no binary or server (`-m "not records"`), in a few minutes after a
# one-file change. It is not the test command: scripts/test.sh runs everything (CI runs it).
# Needs the venv (scripts/venv.sh, made by scripts/test.sh or on first use here).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> cargo test --lib (loadgen, loadgen-servers, loadgen-tcpinfo)"
cargo test --workspace --lib --locked -q

[ -x .venv/bin/python ] || ./scripts/venv.sh
echo "==> pytest -m 'not records' (no binary, no server)"
.venv/bin/python -m pytest analysis/tests -m "not records" -q -n "${PYTEST_WORKERS:-2}" "$@"
