"""nginx, as Debian packages it, started by the tests with a config of ours: a fast static path
(``/static``, a 64-byte file), two ``limit_req`` limiters (``/limit429`` answering 429,
``/limit503`` answering 503 with ``Retry-After: 1``), a reverse proxy (``/proxy``) to an
upstream with a keep-alive pool of two connections, and ``stub_status``. One worker process;
its access log (``$msec $status $request_time``) is the server's own record.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .stacks import Stack, free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
#: Each limiter's rate (requests/s) and the burst it lets through at once.
LIMIT_RPS = 300
LIMIT_BURST = 20

CONFIG = """
user root;
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  log_format zoo '$msec $status $request_time';
  access_log {d}/access.log zoo;
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  keepalive_requests 100000;
  limit_req_zone $binary_remote_addr zone=z429:1m rate={rate}r/s;
  limit_req_zone $binary_remote_addr zone=z503:1m rate={rate}r/s;
  upstream slow {{ server {upstream}; keepalive 2; }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location = /static {{ alias {d}/www/static.txt; }}
    location = /limit429 {{
      limit_req zone=z429 burst={burst} nodelay; limit_req_status 429;
      alias {d}/www/static.txt;
    }}
    location = /limit503 {{
      limit_req zone=z503 burst={burst} nodelay; limit_req_status 503;
      add_header Retry-After 1 always;
      alias {d}/www/static.txt;
    }}
    location /proxy {{
      proxy_pass http://slow/; proxy_http_version 1.1; proxy_set_header Connection "";
    }}
    location = /nginx_status {{ stub_status; }}
  }}
}}
"""


def why_not() -> str | None:
    return None if Path(NGINX).is_file() else "nginx not installed (apt-get install nginx-light)"


@dataclass
class Nginx:
    url: str
    directory: Path

    @property
    def access_log(self) -> Path:
        return self.directory / "access.log"

    def log(self) -> list[tuple[float, str, float]]:
        """(time s, status, request time s) per line of the access log."""
        rows = []
        for line in self.access_log.read_text().splitlines():
            msec, status, request_time = line.split()[:3]
            rows.append((float(msec), status, float(request_time)))
        return rows


@contextlib.contextmanager
def nginx(upstream: str = "127.0.0.1:9", prefix: Sequence[str] = ()) -> Iterator[Nginx]:
    """nginx on a free port of 127.0.0.1 for the ``with`` block (``upstream``: host:port of
    ``/proxy``'s upstream)."""
    with tempfile.TemporaryDirectory(prefix="loadgen-zoo-nginx-") as name:
        directory = Path(name)
        (directory / "www").mkdir()
        (directory / "tmp").mkdir()
        (directory / "www" / "static.txt").write_bytes(b"x" * 63 + b"\n")
        port = free_port()
        config = directory / "nginx.conf"
        config.write_text(
            CONFIG.format(
                d=directory, port=port, upstream=upstream, rate=LIMIT_RPS, burst=LIMIT_BURST
            )
        )
        check = subprocess.run(
            [NGINX, "-t", "-c", str(config)], capture_output=True, text=True, timeout=30
        )
        if check.returncode != 0:
            raise RuntimeError(f"nginx -t rejected the zoo's config:\n{check.stderr}")
        with Stack([*prefix, NGINX, "-c", str(config)], url=f"http://127.0.0.1:{port}"):
            time.sleep(0.2)
            yield Nginx(f"http://127.0.0.1:{port}", directory)
