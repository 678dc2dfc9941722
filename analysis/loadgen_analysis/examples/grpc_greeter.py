"""A gRPC server the project did not write, for tests, docs and benchmarks (issue 47):
grpcio's (PyPI, ``pip install './[examples]'``), its stubs generated from :data:`PROTO` with
grpcio-tools at start into a temporary directory. It counts every call it is handed;
``demo.Greeter/Hello`` answers ``hello NAME`` and the call's number, or, when the request's
``fail_with`` is a gRPC status code other than 0, aborts the call with that code and the message
``no NAME, ever``.

Run as ``python -m loadgen_analysis.examples.grpc_greeter --proto FILE --url-file FILE``: once
it serves (on ``--port``, default a free one) it writes the .proto and then its URL to those
files (wait for the URL file); on SIGTERM or SIGINT it prints its count and exits.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

PROTO = """syntax = "proto3";
package demo;
message HelloRequest { string name = 1; int32 fail_with = 2; }
message HelloReply { string text = 1; int64 number = 2; }
service Greeter { rpc Hello (HelloRequest) returns (HelloReply); }
"""

#: The method loadgen calls: ``--grpc demo.Greeter/Hello``.
METHOD = "demo.Greeter/Hello"


def _stubs(directory: Path) -> tuple[Any, Any]:
    """demo_pb2 and demo_pb2_grpc, generated into ``directory`` by grpcio-tools."""
    from grpc_tools import protoc

    (directory / "demo.proto").write_text(PROTO)
    args = ["protoc", f"-I{directory}", f"--python_out={directory}"]
    args += [f"--grpc_python_out={directory}", str(directory / "demo.proto")]
    if protoc.main(args) != 0:
        raise RuntimeError("grpcio-tools could not generate the stubs of demo.proto")
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module("demo_pb2"), importlib.import_module("demo_pb2_grpc")
    finally:
        sys.path.remove(str(directory))
        for name in ("demo_pb2", "demo_pb2_grpc"):
            sys.modules.pop(name, None)


class Greeter:
    """A grpcio server on 127.0.0.1 counting the calls it is handed (:attr:`calls`)."""

    def __init__(self, port: int = 0, threads: int = 8) -> None:
        import grpc

        self._grpc = grpc
        self._dir = tempfile.TemporaryDirectory(prefix="grpc-greeter-")
        self._pb2, pb2_grpc = _stubs(Path(self._dir.name))
        self.calls = 0
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads))
        pb2_grpc.add_GreeterServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self._server.start()

    def Hello(self, request: Any, context: Any) -> Any:  # noqa: N802 (the proto's name)
        with self._lock:
            self.calls += 1
            number = self.calls
        if request.fail_with:
            code = next(c for c in self._grpc.StatusCode if c.value[0] == request.fail_with)
            context.abort(code, f"no {request.name}, ever")
        return self._pb2.HelloReply(text=f"hello {request.name}", number=number)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._server.stop(grace=None)
        self._dir.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--proto", type=Path, required=True, help="where to write demo.proto")
    parser.add_argument("--url-file", type=Path, required=True, help="where to write its URL")
    args = parser.parse_args(argv)
    greeter = Greeter(args.port)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    args.proto.write_text(PROTO)
    args.url_file.write_text(greeter.url + "\n")
    done.wait()
    greeter.stop()
    print(f"calls {greeter.calls}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
