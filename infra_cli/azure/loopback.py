"""An azure-core transport over the standard library's http.client, for the local emulator only.

azure-core's default RequestsTransport imports requests, urllib3 and charset_normalizer (~0.2 s of CPU) before the
first request; a `--local` plan reads a handful of resources from a loopback server, so that import is most of its
cost. This transport does the same job for that case: HTTPS with the emulator's certificate, and transport failures
raised as azure-core's ServiceRequestError/ServiceResponseError so the retry policy treats them as it does requests'
failures. Real Azure keeps RequestsTransport (proxies, the system's and certifi's CAs, everything requests handles).

Connections are a pool shared by the reader's threads (as urllib3's pool is): a request takes an idle kept-alive
connection to its host and port, or opens one, and gives it back once the answer is read, so a batch of reads
after the list calls opens only as many connections as run at once beyond those. A new connection resumes the TLS
session of the last one to the same host and port (RFC 8446 section 2.2; Python's `session=`,
https://docs.python.org/3/library/ssl.html#ssl.SSLSocket.session): the server skips its certificate and
signature. A session is only offered from the transport's own SSLContext (ssl refuses another's) to the host
and port it was made with; a server that declines it gets a full handshake, verified as any other.
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
        self._encoding: str | None = None     # one the caller set (azure-core's HttpResponse.encoding setter)

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
        if self._encoding is not None:
            return self._encoding
        _, _, params = (self.content_type or "").partition(";")
        charset = params.strip().partition("charset=")[2].strip('"')
        return charset or "utf-8"

    @encoding.setter
    def encoding(self, value: str | None) -> None:
        self._encoding = value

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


class _Connection(http.client.HTTPSConnection):
    """http.client's HTTPS connection, offering a TLS session to resume (None: a full handshake)."""

    def __init__(self, host: str, port: int, *, timeout: float, context: ssl.SSLContext,
                 session: ssl.SSLSession | None):
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context, self._session = context, session

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)   # TCP only: the TLS wrap is this one's, with the session
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self.host, session=self._session)


class LoopbackTransport(HttpTransport):
    """HTTPS to one host with http.client; connection_verify is a CA file path, True (the default CAs) or False."""

    resume_sessions = True   # bench/bench_plan.py turns it off to measure what resumption saves

    def __init__(self, *, connection_verify: Any = True, connection_timeout: float = 30, read_timeout: float = 120):
        cafile = connection_verify if isinstance(connection_verify, str) else None
        self._context = ssl.create_default_context(cafile=cafile)
        if connection_verify is False:  # what requests' verify=False does
            self._context.check_hostname = False
            self._context.verify_mode = ssl.CERT_NONE
        self._timeouts = (connection_timeout, read_timeout)
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, int], list[_Connection]] = {}     # kept-alive connections, none in use
        self._sessions: dict[tuple[str, int], ssl.SSLSession] = {}   # the last TLS session of each host and port
        self._open: list[_Connection] = []
        self.opened = 0   # connections opened (full handshakes and resumed ones), for benchmarks and tests
        self.resumed = 0

    def open(self) -> None:
        pass

    def close(self) -> None:
        with self._lock:
            connections, self._open, self._idle = self._open, [], {}
        for conn in connections:
            conn.close()

    def __enter__(self) -> "LoopbackTransport":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

    def _connection(self, key: tuple[str, int], connect_timeout: float, read_timeout: float,
                    fresh: bool) -> tuple[_Connection, bool]:
        """An idle connection to key's host and port, or a new one; and whether it was reused (a kept-alive one
        may have been closed by the server meanwhile)."""
        with self._lock:
            idle = self._idle.get(key)
            if idle and not fresh:
                return idle.pop(), True
            session = self._sessions.get(key) if self.resume_sessions else None
        conn = _Connection(key[0], key[1], timeout=connect_timeout, context=self._context, session=session)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ServiceRequestError(f"cannot connect to {key[0]}:{key[1]}: {exc}", error=exc) from exc
        conn.sock.settimeout(read_timeout)
        with self._lock:
            self._open.append(conn)
            self.opened += 1
            self.resumed += bool(conn.sock.session_reused)   # None only before a handshake
        return conn, False

    def _done(self, key: tuple[str, int], conn: _Connection, keep: bool,
              session: ssl.SSLSession | None = None) -> None:
        """A connection whose answer is read: kept for the next request, or closed. Its TLS session (TLS 1.3
        sends the ticket after the handshake, read with the first answer) is the one new connections offer."""
        with self._lock:
            if session is not None:
                self._sessions[key] = session
            if keep and conn.sock is not None:
                self._idle.setdefault(key, []).append(conn)
                return
            if conn in self._open:
                self._open.remove(conn)
        conn.close()

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
        key = (parts.hostname, parts.port or 443)
        for attempt in range(2):
            conn, reused = self._connection(key, connect_timeout, read_timeout, fresh=attempt > 0)
            sock = conn.sock   # http.client lets go of it once an answer says the connection closes
            try:
                sock.settimeout(read_timeout)
                conn.request(request.method, target, body=body, headers=dict(request.headers))
                raw = conn.getresponse()
                session = sock.session   # the ticket came before the answer; read before the answer closes it
                data = raw.read()
            except (OSError, http.client.HTTPException) as exc:
                self._done(key, conn, keep=False)
                # a kept-alive connection the server has since closed: once more on a new one, at once
                if reused and attempt == 0 and isinstance(exc, (http.client.RemoteDisconnected, ConnectionError)):
                    continue
                raise ServiceResponseError(f"{request.method} {parts.path}: {exc}", error=exc) from exc
            self._done(key, conn, keep=not raw.will_close, session=session)
            return LoopbackResponse(request, raw, data)
        raise AssertionError("unreachable")  # the loop returns or raises
