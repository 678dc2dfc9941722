#!/usr/bin/env bash
# Five capacity searches in a row on each limiter row of the zoo (issue 44) — nginx's
# limit_req at 300 r/s answering 503 with Retry-After, and loadgen-server's --rate-limit 300
# (503, Retry-After: 1) — each search with two one-second outages of the target: one between
# two levels (the server stopped as a level's run.json is written, started again a second
# later on its port) and one inside a level (a second into it). Prints a Markdown table: per
# search the answer, its interval, limited_by, how it ended, the levels measured again on an
# outage and the answer's distance from the truth; a row passes when 5 of 5 answers are within
# TOLERANCE (15 %, the zoo's capacity grade) of 300 req/s. OUTAGES=0 runs the same searches
# without outages. The searches use the zoo's capacity flags (2 s levels, p99<100ms,
# error_rate<1%, --tolerance 10%). Runs stay in bench/out/<time>-capacity-outages/.
# ~10 min plus the build.
#
# usage: bench/capacity-outages.sh [SEARCHES]    (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/lib.sh
bench_nginx
bench_venv
cargo build --release --locked -p loadgen -p loadgen-servers >&2

out="bench/out/$(date -u +%Y%m%dT%H%M%SZ)-capacity-outages"
mkdir -p "$out"
echo "runs in $out; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
OUT="$out" SEARCHES="${1:-5}" OUTAGES="${OUTAGES:-1}" "$VENV/bin/python" - <<'PY' | tee "$out/table.md"
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from loadgen_analysis.testing.zoo import nginx as zn
from loadgen_analysis.testing.zoo.stacks import free_port

OUT, SEARCHES = Path(os.environ["OUT"]), int(os.environ["SEARCHES"])
OUTAGES = os.environ["OUTAGES"] != "0"
TRUTH, TOLERANCE = float(zn.LIMIT_RPS), 0.15
LOADGEN = os.environ.get("LOADGEN_BIN", "target/release/loadgen")
SERVER = os.environ.get("LOADGEN_SERVER_BIN", "target/release/loadgen-server")
FLAGS = ["--slo", "p99<100ms", "--slo", "error_rate<1%", "--level-duration", "2s",
         "--warmup", "500ms", "--cool-down", "500ms", "--tolerance", "10%",
         "--allow-unconverged", "--json", "--no-progress"]


class Server:
    """A server process that can be stopped and started again on its port."""

    def __init__(self, argv, port):
        self.argv, self.port, self.proc = argv, port, None

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # until it accepts (nginx takes a moment)
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.argv[0]} did not listen on port {self.port}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


def nginx_row(directory: Path):
    directory = directory.resolve()  # nginx reads relative paths from its own prefix
    (directory / "www").mkdir(parents=True)
    (directory / "tmp").mkdir()
    (directory / "www" / "static.txt").write_bytes(b"x" * 63 + b"\n")
    port = free_port()
    config = directory / "nginx.conf"
    config.write_text(zn.CONFIG.format(d=directory, port=port, upstream="127.0.0.1:9",
                                       rate=zn.LIMIT_RPS, burst=zn.LIMIT_BURST))
    return Server([zn.NGINX, "-c", str(config)], port), f"http://127.0.0.1:{port}/limit503"


def loadgen_server_row(directory: Path):
    port = free_port()
    argv = [SERVER, "--port", str(port), "--rate-limit", str(zn.LIMIT_RPS)]
    return Server(argv, port), f"http://127.0.0.1:{port}/albums/1"


def blink(server: Server, search: Path, done: threading.Event, seen: list):
    """Stop the server for a second between two levels (as the second level's run.json is
    written), then inside one (a second into the fourth level)."""
    def levels(name):
        return sorted(search.glob(f"level-*/{name}")) if search.is_dir() else []

    def wait_for(test):
        while not done.is_set():
            if test():
                return True
            time.sleep(0.01)
        return False

    for where, test, delay in (
        ("between", lambda: len(levels("run.json")) >= 2, 0.0),
        ("inside", lambda: len(list(search.glob("level-*"))) >= 4, 1.0),
    ):
        if not wait_for(test):
            return
        time.sleep(delay)
        server.stop()
        seen.append(f"{where} at {time.strftime('%H:%M:%S')}")
        time.sleep(1.0)
        server.start()


ROWS = (("nginx limit_req 300 r/s → 503 + Retry-After", nginx_row),
        ("loadgen-server --rate-limit 300 (503 + Retry-After)", loadgen_server_row))
print(f"| row | search | answer req/s | interval | limited_by | ended | outages | levels "
      f"re-measured on an outage | off the truth ({TRUTH:.0f} r/s) | within {TOLERANCE:.0%} |")
print("|---|---|---|---|---|---|---|---|---|---|")
totals = []
for r, (name, make) in enumerate(ROWS):
    within = 0
    for i in range(SEARCHES):
        server, url = make(OUT / f"row{r}-server{i}")
        search = OUT / f"row{r}-search{i}"
        server.start()
        done, seen = threading.Event(), []
        watcher = threading.Thread(target=blink, args=(server, search, done, seen))
        if OUTAGES:
            watcher.start()
        try:
            proc = subprocess.run([LOADGEN, "capacity", "--url", url, *FLAGS, "--out",
                                   str(search)], capture_output=True, text=True, timeout=900)
        finally:
            done.set()
            if OUTAGES:
                watcher.join()
            server.stop()
        try:
            c = json.loads((search / "capacity.json").read_text())
        except FileNotFoundError:
            print(f"| {name} | {i + 1} | — | exit {proc.returncode}: {proc.stderr[-200:]} |"
                  " | | | | | no |")
            continue
        found = c.get("capacity_rps")
        lo, hi = (c.get("interval") or [None, None])
        again = sum(1 for level in c["levels"] if level.get("outage"))
        off = (found - TRUTH) / TRUTH if found is not None else None
        ok = off is not None and abs(off) <= TOLERANCE
        within += ok
        print(f"| {name} | {i + 1} | {found} | {lo}–{hi} | {c.get('limited_by')} | "
              f"{c.get('ended')} (exit {proc.returncode}) | {', '.join(seen) or '—'} | {again} | "
              f"{off:+.1%} | {'yes' if ok else 'NO'} |" if off is not None else
              f"| {name} | {i + 1} | — | — | {c.get('limited_by')} | {c.get('ended')} | "
              f"{', '.join(seen)} | {again} | — | NO |", flush=True)
        if i == 0:
            print(f"<!-- {name}: {c.get('answer')} -->", flush=True)
    totals.append(f"{name}: {within} of {SEARCHES} within {TOLERANCE:.0%}")
print()
for line in totals:
    print(f"- {line}")
PY
