"""The local reader's response (azure/loopback.py LoopbackResponse) keeps azure-core's HttpResponse contract:
`encoding` is the one a caller set, else the Content-Type's charset, else UTF-8, and text() decodes with it
(https://learn.microsoft.com/python/api/azure-core/azure.core.rest.httpresponse#azure-core-rest-httpresponse-encoding)."""

from __future__ import annotations

import http.client
import socket

from azure.core.rest import HttpRequest

from infra_cli.azure.loopback import LoopbackResponse


def _response(head: bytes, body: bytes) -> LoopbackResponse:
    """A response http.client parsed from `head` and `body` sent over a real socket pair."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        raw = http.client.HTTPResponse(ours)
        raw.begin()
        return LoopbackResponse(HttpRequest("GET", "https://127.0.0.1/x"), raw, raw.read())


def test_encoding_is_the_charset_until_a_caller_sets_one():
    response = _response(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=latin-1\r\n", "é".encode("latin-1"))
    assert (response.encoding, response.text()) == ("latin-1", "é")
    response.encoding = "utf-8"
    assert (response.encoding, response.text()) == ("utf-8", "\ufffd")
    response.encoding = None
    assert response.encoding == "latin-1"


def test_encoding_without_a_charset_is_utf8():
    response = _response(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", "é".encode())
    assert (response.encoding, response.text()) == ("utf-8", "é")
