"""The local reader's transport (azure/loopback.py) against a server that never answers: one that accepts the TCP
connection and then says nothing (no TLS handshake), and one that completes TLS and never sends a response.
Both must end in azure-core's error types within the timeouts, never hang the plan."""

from __future__ import annotations

import socket
import ssl
import sys
import threading

import pytest
from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.core.rest import HttpRequest

from infra_cli.azure.loopback import LoopbackTransport
from infra_cli.emulator.tls import ensure_certificate


def _silent_server(wrap: ssl.SSLContext | None) -> tuple[int, threading.Event, threading.Event]:
    """A listener that accepts, optionally completes TLS, then reads and never writes. `gave_up` is set when the
    client closed the connection first (its timeout fired); the server itself closes only after 300 s, so a client
    without a timeout ends with the server's close and `gave_up` unset. No test here asserts a duration."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    gave_up, done = threading.Event(), threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.settimeout(300)
        try:
            if wrap is not None:
                conn = wrap.wrap_socket(conn, server_side=True)
            while conn.recv(65536):   # the request, then the client's close (b"") when its timeout fires
                pass
            gave_up.set()
        except OSError:               # a reset is the client giving up too; the 300 s timeout is not
            if not isinstance(sys.exc_info()[1], TimeoutError):
                gave_up.set()
        finally:
            done.set()
            conn.close()
            listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], gave_up, done


def test_a_server_that_never_handshakes_is_a_request_error_within_the_connect_timeout(tmp_path):
    port, gave_up, done = _silent_server(None)
    transport = LoopbackTransport(connection_verify=False, connection_timeout=0.5, read_timeout=0.5)
    with pytest.raises(ServiceRequestError):
        transport.send(HttpRequest("GET", f"https://127.0.0.1:{port}/subscriptions/x?api-version=1"))
    done.wait(60)
    assert gave_up.is_set(), "the call ended because the server closed, not by the client's own timeout"


def test_a_server_that_never_answers_is_a_response_error_within_the_read_timeout(tmp_path):
    cert, key = ensure_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    port, gave_up, done = _silent_server(context)
    transport = LoopbackTransport(connection_verify=str(cert), connection_timeout=5, read_timeout=0.5)
    with pytest.raises(ServiceResponseError):
        transport.send(HttpRequest("GET", f"https://127.0.0.1:{port}/subscriptions/x?api-version=1"))
    done.wait(60)
    assert gave_up.is_set(), "the call ended because the server closed, not by the client's own timeout"
