#!/usr/bin/env bash
# The analysis venv at .venv with the pinned dependencies of analysis/requirements.lock and the
# zoo's servers (analysis/zoo.lock), bytecode compiled: made or refreshed only when a lock or
# pyproject.toml changed (stamps in the venv). Used by scripts/test-python.sh and bench/lib.sh,
# so the tests and the benchmarks run in one venv made one way.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
LOCK=analysis/requirements.lock

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
# The package's own bytecode too (an editable install is compiled by neither installer).
"$VENV/bin/python" -m compileall -q -j 0 analysis/loadgen_analysis >/dev/null
