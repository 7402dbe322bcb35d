"""Idle connections against the emulator (issue 22, item 5): before, a plain TCP connection that never sent a
byte held a thread for ever (none was closed within 40 s), so a few hundred of them starved the emulator. Now a
TLS handshake must end within HANDSHAKE_TIMEOUT_S, a kept-alive connection idles at most IDLE_TIMEOUT_S, and at
most MAX_CONNECTIONS threads serve connections: past it the one that has waited longest for its client is
closed. The sockets here wait generously (GENEROUS_S) for the server to close them; nothing times the server."""

from __future__ import annotations

import socket
import ssl
import threading

import requests

from infra_cli.emulator import server as emulator_server

GENEROUS_S = 60
MAX = getattr(emulator_server, "MAX_CONNECTIONS", 64)


def _silent(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=GENEROUS_S)
    return s


def _closed_by_server(s: socket.socket) -> bool:
    """True when the server ends the connection (EOF or reset) before GENEROUS_S; False if it is still open."""
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except (TimeoutError, socket.timeout):
        return False


def _authorised_get(emulator) -> requests.Response:
    return requests.get(f"{emulator.url}subscriptions/x/providers/Microsoft.Compute/skus?api-version=2021-07-01",
                        headers={"Authorization": f"Bearer {emulator.token}"}, verify=str(emulator.cert_path),
                        timeout=GENEROUS_S)


def test_a_connection_that_never_speaks_is_closed(emulator):
    s = _silent(emulator.port)
    try:
        assert _closed_by_server(s), "a silent TCP connection was still open after the generous wait"
    finally:
        s.close()


def test_a_kept_alive_connection_that_goes_quiet_is_closed(emulator):
    context = ssl.create_default_context(cafile=str(emulator.cert_path))
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=GENEROUS_S) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:   # the handshake done, then silence
            try:
                assert tls.recv(1) == b""
            except (ssl.SSLError, ConnectionResetError):
                pass
            except (TimeoutError, socket.timeout):
                raise AssertionError("an idle TLS connection was still open after the generous wait") from None


def test_many_silent_connections_neither_take_a_thread_each_nor_lock_out_the_token_holder(emulator):
    before = threading.active_count()
    silent = [_silent(emulator.port) for _ in range(MAX + 50)]
    try:
        r = _authorised_get(emulator)   # accepted after every silent one (the accept loop takes them in order)
        assert r.status_code == 200, r.text
        assert threading.active_count() <= before + MAX + 2
        assert _closed_by_server(silent[0]), "the longest-waiting silent connection was not closed"
        assert _authorised_get(emulator).status_code == 200
    finally:
        for s in silent:
            s.close()
