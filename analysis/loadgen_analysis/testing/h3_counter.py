"""An HTTP/3 server the project did not write: aioquic's (PyPI, analysis/zoo.lock), with a small
handler on its H3 API that counts every request it is handed (issue 47's witness for
``loadgen run --http3``, analysis/tests/test_http3.py).

Knobs make it fail the ways HTTP/3 servers do: ``reset_every`` resets every n-th request's
stream instead of answering it (RESET_STREAM, H3_REQUEST_CANCELLED), ``close_after`` closes a
connection once it has answered that many requests, and ``refuse_after`` refuses the QUIC
handshake of every connection after that many (CONNECTION_CLOSE with CONNECTION_REFUSED), so
a client that reconnects is turned away. It runs on its own asyncio loop in a thread, on
127.0.0.1 and a free UDP port, with a self-signed certificate (:attr:`H3Counter.ca`).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import tempfile
import threading
from pathlib import Path
from typing import Any

#: H3_REQUEST_CANCELLED (RFC 9114, 8.1): what a reset stream carries.
H3_REQUEST_CANCELLED = 0x10C
#: H3_NO_ERROR: a connection closed after its last answer.
H3_NO_ERROR = 0x100
#: The QUIC transport error CONNECTION_REFUSED (RFC 9000, 20.1).
CONNECTION_REFUSED = 0x2


def _self_signed(cert_path: Path, key_path: Path) -> None:
    """A certificate for 127.0.0.1 and its key, as PEM (``cryptography``, in the lock)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _protocol_class() -> type:
    """The connection protocol, defined once aioquic is imported (it is an optional package)."""
    from aioquic.asyncio import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.events import ProtocolNegotiated

    class Counting(QuicConnectionProtocol):
        def __init__(self, *args: Any, counter: H3Counter, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._counter = counter
            self._h3: H3Connection | None = None
            self._answered = 0

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
                if self._counter._admit():
                    self._h3 = H3Connection(self._quic)
                else:
                    self._quic.close(error_code=CONNECTION_REFUSED, reason_phrase="refused")
                    self.transmit()
                    return
            if self._h3 is None:
                return
            for h3_event in self._h3.handle_event(event):
                request = isinstance(h3_event, HeadersReceived | DataReceived)
                if request and h3_event.stream_ended:
                    self._answer(h3_event.stream_id)

        def _answer(self, stream_id: int) -> None:
            assert self._h3 is not None
            if self._counter._count_and_reset():
                self._quic.reset_stream(stream_id, H3_REQUEST_CANCELLED)
            else:
                body = b"hello from aioquic\n"
                headers = [(b":status", b"200"), (b"content-length", str(len(body)).encode())]
                self._h3.send_headers(stream_id, headers)
                self._h3.send_data(stream_id, body, end_stream=True)
                self._answered += 1
            close_after = self._counter.close_after
            if close_after and self._answered >= close_after:
                self._quic.close(error_code=H3_NO_ERROR, frame_type=None, reason_phrase="done")
            self.transmit()

    return Counting


class H3Counter:
    """aioquic's HTTP/3 server on 127.0.0.1, counting the requests it is handed
    (:attr:`requests`), the streams it reset (:attr:`resets`) and the handshakes it refused
    (:attr:`refused`)."""

    def __init__(
        self, *, reset_every: int = 0, close_after: int = 0, refuse_after: int = 0
    ) -> None:
        from aioquic.asyncio import serve
        from aioquic.h3.connection import H3_ALPN
        from aioquic.quic.configuration import QuicConfiguration

        self.reset_every = reset_every
        self.close_after = close_after
        self.refuse_after = refuse_after
        self.requests = self.resets = self.connections = self.refused = 0
        self._dir = tempfile.TemporaryDirectory(prefix="h3-counter-")
        self.ca = Path(self._dir.name) / "cert.pem"
        key = Path(self._dir.name) / "key.pem"
        _self_signed(self.ca, key)
        configuration = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
        configuration.load_cert_chain(self.ca, key)
        protocol = _protocol_class()
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            serve(
                "127.0.0.1",
                0,
                configuration=configuration,
                create_protocol=lambda *a, **kw: protocol(*a, counter=self, **kw),
            )
        )
        self.port = self._server._transport.get_extra_info("sockname")[1]
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def _admit(self) -> bool:
        """A new connection's handshake: served, or refused past ``refuse_after``."""
        self.connections += 1
        if self.refuse_after and self.connections > self.refuse_after:
            self.refused += 1
            return False
        return True

    def _count_and_reset(self) -> bool:
        """Counts a request; true when its stream is to be reset instead of answered."""
        self.requests += 1
        reset = bool(self.reset_every) and self.requests % self.reset_every == 0
        self.resets += reset
        return reset

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._dir.cleanup()
