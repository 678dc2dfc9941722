"""A CPU-bound server on CPython's standard library, as a user would write one: a
``ThreadingHTTPServer`` (a thread per connection, all under one GIL) whose every request burns
``--cpu-ms`` of its thread's CPU on hashing, then answers a 64-byte body the way
``http.server`` does (headers flushed in one write, the body in the next). ``/metrics`` is
prometheus_client's exposition (``zoo_requests_total`` and the process's
``process_cpu_seconds_total``): the server's own counters. Prints ``listening on URL``.

``python -m loadgen_analysis.testing.zoo.gil_server --cpu-ms 2``; no project code is imported.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, Counter, generate_latest

REQUESTS = Counter("zoo_requests", "Requests answered (not /metrics)")
BODY = b"x" * 63 + b"\n"


def burn(cpu_s: float) -> None:
    """Hash small blocks until this thread has used ``cpu_s`` of CPU (small inputs hold the
    GIL: hashlib releases it only for inputs over 2 KiB)."""
    end = time.thread_time() + cpu_s
    block = b"loadgen"
    while time.thread_time() < end:
        for _ in range(50):
            block = hashlib.sha256(block).digest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cpu_s = 0.002

    def do_GET(self) -> None:
        if self.path == "/metrics":
            body, kind = generate_latest(), CONTENT_TYPE_LATEST
        else:
            burn(self.cpu_s)
            REQUESTS.inc()
            body, kind = BODY, "text/plain"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()  # http.server flushes the headers here: one write
        self.wfile.write(body)  # the body: a second write, after the GIL is had again

    def log_message(self, format: str, *args: object) -> None:
        pass  # the counter is the log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cpu-ms", type=float, default=2.0)
    args = parser.parse_args()
    Handler.cpu_s = args.cpu_ms / 1000
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
