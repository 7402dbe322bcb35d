"""A registry's redirects: the bearer token goes only to the exact origin (scheme, host, port) that asked for it,
and a redirect from https to plain http is refused (the token would cross the network in clear).

A real https registry front (a threaded http.server) whose port speaks TLS and plain http alike (it peeks at
the first byte: a TLS handshake starts with 0x16), so a redirect to `http://` on the registry's own host and
port reaches the same server, which records what each request carried and over which scheme.
"""

from __future__ import annotations

import hashlib
import json
import socket
import ssl
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from infra_cli.emulator.tls import ensure_certificate
from infra_cli.image.blob import Descriptor
from infra_cli.image.errors import ImageReadError
from infra_cli.image.reference import parse_reference
from infra_cli.image.registry import RegistryStore

TOKEN = "tok-redirect-0123456789"
BLOB = b"layer bytes\n" * 100
DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()


class Registry(ThreadingHTTPServer):
    """/v2/...: a bearer challenge, then a 307 for each blob to `redirect_to` (a format string of {port}, {path});
    /token: an anonymous token; /storage/...: the blob. `log`: (scheme, path, Authorization) of each request."""
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext, redirect_to: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context, self.redirect_to = context, redirect_to
        self.port = self.server_address[1]
        self.log: list[tuple[str, str, str | None]] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def get_request(self):
        sock, address = super().get_request()
        sock.settimeout(10)
        try:
            first = sock.recv(1, socket.MSG_PEEK)
        except OSError:
            first = b""
        if first == b"\x16":      # a TLS ClientHello: this connection is https
            sock = self.context.wrap_socket(sock, server_side=True)
        return sock, address


class _Handler(BaseHTTPRequestHandler):
    server: Registry

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes = b"", **headers: str) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        s, authz = self.server, self.headers.get("Authorization")
        scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
        path = urllib.parse.urlsplit(self.path).path
        s.log.append((scheme, path, authz))
        if path == "/token":
            return self._send(200, json.dumps({"token": TOKEN}).encode(), Content_Type="application/json")
        if path.startswith("/storage/"):
            return self._send(200, BLOB, Content_Type="application/octet-stream")
        if authz != f"Bearer {TOKEN}":
            challenge = f'Bearer realm="https://127.0.0.1:{s.port}/token",service="r",scope="repository:t/x:pull"'
            return self._send(401, b'{"errors":[]}', WWW_Authenticate=challenge)
        self._send(307, Location=s.redirect_to.format(port=s.port, path=path))


@pytest.fixture
def context(tmp_path):
    (tmp_path / "tls").mkdir(mode=0o700)
    cert, key = ensure_certificate(tmp_path / "tls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


@pytest.fixture
def serve(context, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))     # no login of the user's: an anonymous token
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    servers = []

    def make(redirect_to: str) -> Registry:
        servers.append(Registry(context, redirect_to))
        return servers[-1]

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def _read_blob(registry: Registry) -> bytes:
    store = RegistryStore(parse_reference(f"127.0.0.1:{registry.port}/t/x@{DIGEST}"), insecure=True)
    try:
        answer = store.open_blob(Descriptor("application/octet-stream", DIGEST, len(BLOB)))
        return answer.body(len(BLOB) + 1)
    finally:
        store.close()


def test_the_server_speaks_both_schemes_on_one_port(serve):
    """The fixture's premise: https and plain http on one port (else the refusal below would prove nothing)."""
    registry = serve("https://127.0.0.1:{port}/storage{path}")
    import urllib.request
    assert urllib.request.urlopen(f"http://127.0.0.1:{registry.port}/storage/x", timeout=10).read() == BLOB
    assert registry.log[-1][0] == "http"


def test_a_redirect_from_https_to_http_on_the_same_host_and_port_is_refused(serve):
    registry = serve("http://127.0.0.1:{port}/storage{path}")
    with pytest.raises(ImageReadError) as caught:
        _read_blob(registry)
    assert "plain http" in str(caught.value) and TOKEN not in str(caught.value)
    assert ("https", f"/v2/t/x/blobs/{DIGEST}", f"Bearer {TOKEN}") in registry.log   # the token was in use...
    assert not [entry for entry in registry.log if entry[0] == "http"]               # ...and nothing went in clear


def test_a_redirect_to_the_same_origin_keeps_the_token(serve):
    registry = serve("https://127.0.0.1:{port}/storage{path}")
    assert _read_blob(registry) == BLOB
    assert registry.log[-1] == ("https", f"/storage/v2/t/x/blobs/{DIGEST}", f"Bearer {TOKEN}")


@pytest.mark.parametrize("where", ["https://localhost:{port}/storage{path}",      # same port, another host name
                                   "https://127.0.0.1:{other}/storage{path}"])    # same host, another port
def test_a_redirect_to_another_origin_carries_no_token(serve, where):
    storage = serve("unused")
    registry = serve(where.replace("{other}", str(storage.port)))
    assert _read_blob(registry) == BLOB
    fetched = [entry for entry in registry.log + storage.log if entry[1].startswith("/storage/")]
    assert fetched and all(authz is None for _, _, authz in fetched)
