#!/usr/bin/env bash
# Python checks of the analysis package: creates/refreshes the venv at .venv with the pinned
# dependencies of analysis/requirements.lock, then runs ruff (lint + format) and pytest (with
# test_doc_commands.py, every runnable command of the docs, and test_notebook_install.py, the
# four notebooks headless from a pip install).
# Needs the debug binaries (cargo build --workspace) for the tests that record real runs;
# LOADGEN_BIN / LOADGEN_SERVER_BIN point elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it began, counted from the start of the whole test command.
export LOADGEN_TESTS_STARTED_S=${LOADGEN_TESTS_STARTED_S:-$(date +%s)}
step() {
  local at_s=$(($(date +%s) - LOADGEN_TESTS_STARTED_S))
  printf '\n==> %s  (at %dm%02ds)\n' "$*" $((at_s / 60)) $((at_s % 60))
}

PYTHON=${PYTHON:-python3}
VENV=.venv
LOCK=analysis/requirements.lock

if [ -z "${LOADGEN_PYTHON_PREPARED:-}" ]; then
  step "python venv ($VENV) with the pinned dependencies of $LOCK"
  ./scripts/venv.sh
fi
PY="$VENV/bin/python"
# The notebooks' kernel must be this venv's Python.
export PATH="$PWD/$VENV/bin:$PATH"

step "ruff check analysis/"
"$VENV/bin/ruff" check analysis/

step "ruff format --check analysis/"
"$VENV/bin/ruff" format --check analysis/

step "kubernetes manifests (deploy/kubernetes, offline schemas)"
# Not kustomization.yaml: it is kustomize's file, not a Kubernetes object, so has no schema.
"$VENV/bin/kubernetes-validate" --strict --quiet deploy/kubernetes/configmap.yaml \
  deploy/kubernetes/job.yaml deploy/kubernetes/serviceaccount.yaml

if [ -z "${LOADGEN_TEST_UNAVAILABLE+set}" ]; then
  step "the tools the tests use (scripts/test-tools.sh)"
  mkdir -p target
  ./scripts/test-tools.sh target/test-unavailable
  LOADGEN_TEST_UNAVAILABLE=$(paste -sd, target/test-unavailable)
  export LOADGEN_TEST_UNAVAILABLE
fi

step "pytest analysis/tests"
# Exit 5 (no tests collected) is a failure here too: pytest returns it non-zero.
# Includes test_doc_commands.py: every runnable command of README.md, docs/ and deploy/; and
# test_notebook_install.py: every notebook, headless from a scratch directory, against a
# `pip install ./` in a fresh venv (they run from anywhere).
# Two tests at a time (pytest-xdist): most of a test's time is a real run's fixed duration, not
# CPU. `loadgroup`: tests that share a module-scoped fixture stay on one worker (conftest.py marks
# them), every other test is scheduled on its own, so no long file makes the tail.
# PYTEST_WORKERS=1 runs them one after another, for a machine too small for two.
workers=${PYTEST_WORKERS:-2}
if [ "$workers" -gt 1 ]; then
  "$PY" -m pytest analysis/tests -n "$workers" --dist loadgroup --durations=15
else
  "$PY" -m pytest analysis/tests --durations=15
fi
