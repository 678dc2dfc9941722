"""The WSGI application gunicorn's sync workers serve in the zoo: ``/cpu`` burns
``ZOO_CPU_MS`` (2) of the worker's CPU, ``/sleep`` sleeps ``ZOO_SLEEP_MS`` (10) — a worker
held by I/O — each answering a 64-byte body. gunicorn's own access log (``%(L)s``, the request
time) is the server's record. ``gunicorn loadgen_analysis.testing.zoo.wsgi_app:app``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from .gil_server import BODY, burn

CPU_S = float(os.environ.get("ZOO_CPU_MS", "2")) / 1000
SLEEP_S = float(os.environ.get("ZOO_SLEEP_MS", "10")) / 1000


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "/")
    if path.startswith("/cpu"):
        burn(CPU_S)
    elif path.startswith("/sleep"):
        time.sleep(SLEEP_S)
    headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]
    start_response("200 OK", headers)
    return [BODY]
