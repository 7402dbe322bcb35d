"""An azure-core transport over the standard library's http.client, for the local emulator only.

azure-core's default RequestsTransport imports requests, urllib3 and charset_normalizer (~0.2 s of CPU) before the
first request; a `--local` plan reads a handful of resources from a loopback server, so that import is most of its
cost. This transport does the same job for that case: HTTPS with the emulator's certificate, one kept-alive
connection per thread (the reader's list calls run concurrently), and transport failures raised as azure-core's
ServiceRequestError/ServiceResponseError so the retry policy treats them as it does requests' failures. Real Azure
keeps RequestsTransport (proxies, the system's and certifi's CAs, everything requests handles).
Custom transports are an azure-core extension point:
https://learn.microsoft.com/python/api/azure-core/azure.core.pipeline.transport.httptransport
"""

from __future__ import annotations

import http.client
import json as jsonlib
import ssl
import threading
from typing import Any, Iterator
from urllib.parse import quote, urlsplit

from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest import HttpResponse
from azure.core.utils import CaseInsensitiveDict


class LoopbackResponse(HttpResponse):
    """A fully read response (the emulator's answers are small JSON documents)."""

    def __init__(self, request: Any, raw: http.client.HTTPResponse, body: bytes):
        self._request, self._body = request, body
        self._status, self._reason = raw.status, raw.reason
        self._headers = CaseInsensitiveDict(raw.getheaders())

    request = property(lambda self: self._request)
    status_code = property(lambda self: self._status)
    reason = property(lambda self: self._reason)
    headers = property(lambda self: self._headers)
    content = property(lambda self: self._body)
    content_type = property(lambda self: self._headers.get("Content-Type"))
    url = property(lambda self: self._request.url)
    is_closed = property(lambda self: True)
    is_stream_consumed = property(lambda self: True)

    @property
    def encoding(self) -> str:
        _, _, params = (self.content_type or "").partition(";")
        charset = params.strip().partition("charset=")[2].strip('"')
        return charset or "utf-8"

    def text(self, encoding: str | None = None) -> str:
        return self._body.decode(encoding or self.encoding, errors="replace")

    def json(self) -> Any:
        return jsonlib.loads(self._body)

    def raise_for_status(self) -> None:
        if self._status >= 400:
            raise HttpResponseError(response=self)

    def read(self) -> bytes:
        return self._body

    def iter_raw(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body

    iter_bytes = iter_raw

    def close(self) -> None:
        pass

    def __enter__(self) -> "LoopbackResponse":
        return self

    def __exit__(self, *args: Any) -> None:
        pass

    def __repr__(self) -> str:
        return f"<LoopbackResponse: {self._status} {self._reason}>"


class LoopbackTransport(HttpTransport):
    """HTTPS to one host with http.client; connection_verify is a CA file path, True (the default CAs) or False."""

    def __init__(self, *, connection_verify: Any = True, connection_timeout: float = 30, read_timeout: float = 120):
        cafile = connection_verify if isinstance(connection_verify, str) else None
        self._context = ssl.create_default_context(cafile=cafile)
        if connection_verify is False:  # what requests' verify=False does
            self._context.check_hostname = False
            self._context.verify_mode = ssl.CERT_NONE
        self._timeouts = (connection_timeout, read_timeout)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[http.client.HTTPSConnection] = []

    def open(self) -> None:
        pass

    def close(self) -> None:
        with self._lock:
            connections, self._open = self._open, []
        for conn in connections:
            conn.close()

    def __enter__(self) -> "LoopbackTransport":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

    def _connection(self, host: str, port: int, connect_timeout: float, read_timeout: float,
                    fresh: bool) -> tuple[http.client.HTTPSConnection, bool]:
        """This thread's connection to host:port, and whether it was reused (a kept-alive one may have been closed
        by the server meanwhile)."""
        conns = self._local.__dict__.setdefault("conns", {})
        conn = conns.get((host, port))
        if conn is not None and not fresh:
            return conn, True
        if conn is not None:
            conn.close()
        conn = http.client.HTTPSConnection(host, port, timeout=connect_timeout, context=self._context)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as exc:
            raise ServiceRequestError(f"cannot connect to {host}:{port}: {exc}", error=exc) from exc
        conn.sock.settimeout(read_timeout)
        conns[(host, port)] = conn
        with self._lock:
            self._open.append(conn)
        return conn, False

    def send(self, request: Any, **kwargs: Any) -> LoopbackResponse:
        parts = urlsplit(request.url)
        if parts.scheme != "https":
            raise ServiceRequestError(f"the loopback transport speaks https only, not {request.url!r}")
        # quoted as requests quotes a URL (requote_uri): azure-core leaves "$orderBy=createdtime desc" as it is
        target = quote(parts.path + (f"?{parts.query}" if parts.query else ""), safe="!#$%&'()*+,/:;=?@[]~")
        connect_timeout = kwargs.get("connection_timeout") or self._timeouts[0]
        read_timeout = kwargs.get("read_timeout") or self._timeouts[1]
        body = request.content
        if isinstance(body, str):
            body = body.encode("utf-8")
        for attempt in range(2):
            conn, reused = self._connection(parts.hostname, parts.port or 443, connect_timeout, read_timeout,
                                            fresh=attempt > 0)
            try:
                conn.request(request.method, target, body=body, headers=dict(request.headers))
                raw = conn.getresponse()
                data = raw.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conns.pop((parts.hostname, parts.port or 443), None)
                # a kept-alive connection the server has since closed: once more on a new one, at once
                if reused and attempt == 0 and isinstance(exc, (http.client.RemoteDisconnected, ConnectionError)):
                    continue
                raise ServiceResponseError(f"{request.method} {parts.path}: {exc}", error=exc) from exc
            if raw.will_close:
                conn.close()
                self._local.conns.pop((parts.hostname, parts.port or 443), None)
            return LoopbackResponse(request, raw, data)
        raise AssertionError("unreachable")  # the loop returns or raises
