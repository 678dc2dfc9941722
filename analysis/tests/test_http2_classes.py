"""Regression test for issue 36, finding 8: ``loadgen run --http2`` against a server that
speaks only HTTP/1.1 classed about 1 request in 50 ``reset`` instead of ``protocol``. Such a
server answers the HTTP/2 preface in HTTP/1.x and closes with the client's frames unread — a
TCP reset, which sometimes reached the client's next write before the answer was read. The
server here is Python's own ``http.server`` (a real HTTP/1.1-only server; it answered 239 of
2,000 requests that way before the fix); every row must be ``protocol``, counted from the
Parquet rows.
"""

from __future__ import annotations

import http.server
import threading
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from loadgen_analysis.testing import harness

from .conftest import Binaries

REQUESTS = 2000


class _Http1Only(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: object) -> None:
        pass


def test_http2_against_an_http1_only_server_is_protocol_every_time(
    binaries: Binaries, tmp_path: Path
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Http1Only)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        harness.run_loadgen(
            f"http://127.0.0.1:{server.server_address[1]}/",
            tmp_path / "run",
            8,
            duration=None,
            requests=REQUESTS,
            extra=("--http2",),
            binary=binaries.loadgen,
            timeout_s=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    errors = pq.read_table(tmp_path / "run" / "requests").column("error").to_pylist()
    assert Counter(errors) == {"protocol": REQUESTS}
