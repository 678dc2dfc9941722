#!/usr/bin/env bash
# Soak (loadgen/tests/soak.rs, left out of the test command): the open model at 500 req/s for
# LOADGEN_SOAK_SECS seconds (default here 300) against loadgen-server failing 1 % of requests
# and stalling 200 ms every 2 s, a release build. Prints the books (rows, scheduled, dropped,
# late, the server's failures) and the client's RSS second by second, and fails when the books
# do not balance or the RSS of the second half grew more than 16 MiB over the first's.
set -euo pipefail
cd "$(dirname "$0")/.."
export LOADGEN_SOAK_SECS=${LOADGEN_SOAK_SECS:-300}
exec cargo test --release --locked -p loadgen --test soak -- --ignored --nocapture
