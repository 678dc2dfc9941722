#!/usr/bin/env bash
# Python checks of the analysis package: creates/refreshes the venv at .venv with the pinned
# dependencies of analysis/requirements.lock, then runs ruff (lint + format) and pytest (with
# test_doc_commands.py, every runnable command of the docs, and test_notebook_install.py, the
# four notebooks headless from a pip install).
# Needs the debug binaries (cargo build --workspace) for the tests that record real runs;
# LOADGEN_BIN / LOADGEN_SERVER_BIN point elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

PYTHON=${PYTHON:-python3}
VENV=.venv
LOCK=analysis/requirements.lock

step "python venv ($VENV) with the pinned dependencies of $LOCK"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "error: Python 3.11 or newer is needed ($PYTHON is $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -m venv "$VENV"; then
    echo "error: could not create a venv; on Debian: apt-get install python3-venv" >&2
    exit 1
  fi
fi
# Install with uv when it can be had (much faster), else with pip; both read the same lock.
# Both compile the packages' bytecode as they install (pip does by default, uv when asked):
# where PYTHONDONTWRITEBYTECODE is set, as on CI machines, nothing else would, and every
# `loadgen-analyze` a test starts would compile pandas, SciPy and matplotlib afresh (~5 s of
# CPU each; it doubled the suite's time).
# The stamp skips the install when neither the lock nor pyproject.toml changed.
stamp="$VENV/.installed-$( (cat "$LOCK" pyproject.toml; echo compiled) | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'uv==0.13.9' \
    || echo "note: uv unavailable; installing with pip"
  if [ -x "$VENV/bin/uv" ]; then
    "$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" -r "$LOCK"
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e .
  else
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$LOCK"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e .
  fi
  # A venv made before the installs compiled (an older stamp) has none yet.
  "$VENV/bin/python" -m compileall -q -j 0 \
    "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null \
    || echo "note: some installed files did not compile; they are compiled when imported"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
# The zoo's PyPI servers (gunicorn, for analysis/tests/test_zoo.py), from their own lock.
zoo_stamp="$VENV/.zoo-$(sha256sum analysis/zoo.lock | cut -c1-16)"
if [ ! -f "$zoo_stamp" ]; then
  if [ -x "$VENV/bin/uv" ]; then
    "$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" -r analysis/zoo.lock
  else
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r analysis/zoo.lock
  fi
  rm -f "$VENV"/.zoo-*
  touch "$zoo_stamp"
fi
PY="$VENV/bin/python"
# The package's own bytecode too (an editable install is compiled by neither installer).
"$PY" -m compileall -q -j 0 analysis/loadgen_analysis >/dev/null
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

step "Chromium (analysis/tests/test_report_browser.py opens the reports in it)"
if command -v chromium >/dev/null 2>&1; then
  echo "found $(command -v chromium)"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "could not install Debian's chromium package: that test will say it skipped"
else
  echo "chromium is missing and needs apt-get as root to install: that test will say it skipped"
fi

step "pytest analysis/tests"
# Exit 5 (no tests collected) is a failure here too: pytest returns it non-zero.
# Includes test_doc_commands.py: every runnable command of README.md, docs/ and deploy/; and
# test_notebook_install.py: every notebook, headless from a scratch directory, against a
# `pip install ./` in a fresh venv (they run from anywhere).
"$PY" -m pytest analysis/tests
