"""The local reader's transport (azure/loopback.py) shares kept-alive connections between threads and resumes the
TLS session of an earlier connection. Neither may weaken what a connection proves: a session is offered only to
the host and port it was made with, and a server whose certificate is not trusted is refused however many
sessions the transport holds for another. Servers here are small HTTPS servers, each with its own certificate."""

from __future__ import annotations

import json
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.core.rest import HttpRequest

from infra_cli.azure.loopback import LoopbackTransport
from infra_cli.emulator.tls import ensure_certificate


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.server.close_each:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def _server(state: Path, close_each: bool = False):
    """An HTTPS server on 127.0.0.1 with a certificate of its own; (server, cert path)."""
    state.mkdir(mode=0o700)
    cert, key = ensure_certificate(state)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    httpd.close_each = close_each
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    return httpd, cert


def _get(transport: LoopbackTransport, port: int, path: str = "/x"):
    return transport.send(HttpRequest("GET", f"https://127.0.0.1:{port}{path}"))


@pytest.fixture
def servers(tmp_path):
    made = []

    def make(name: str, close_each: bool = False):
        made.append(_server(tmp_path / name, close_each))
        return made[-1]

    yield make
    for httpd, _ in made:
        httpd.shutdown()
        httpd.server_close()


def test_a_new_connection_resumes_the_session_of_the_last_one_to_the_same_server(servers):
    httpd, cert = servers("a", close_each=True)   # every answer closes: each request needs a new connection
    transport = LoopbackTransport(connection_verify=str(cert))
    for i in range(3):
        assert _get(transport, httpd.server_address[1], f"/{i}").json() == {"path": f"/{i}"}
    assert (transport.opened, transport.resumed) == (3, 2)


def test_threads_share_kept_alive_connections(servers):
    httpd, cert = servers("a")
    transport = LoopbackTransport(connection_verify=str(cert))
    for i in range(4):   # one new thread per request, one after another: one connection serves them all
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(_get, transport, httpd.server_address[1], f"/{i}").result().status_code == 200
    assert transport.opened == 1
    transport.close()


def test_a_session_is_never_offered_to_another_port_and_an_untrusted_certificate_is_refused(servers):
    trusted, cert = servers("trusted", close_each=True)
    stranger, _ = servers("stranger")   # a certificate of its own, which the transport does not trust
    transport = LoopbackTransport(connection_verify=str(cert))
    _get(transport, trusted.server_address[1])
    _get(transport, trusted.server_address[1])
    assert transport.resumed == 1
    with pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"):
        _get(transport, stranger.server_address[1])
    assert set(transport._sessions) == {("127.0.0.1", trusted.server_address[1])}
    assert transport.resumed == 1
