"""A registry as an image store: the OCI distribution API over http.client, with auth and redirects.

https always, except for loopback registries and `--insecure` (then https is tried first, and http if the
server does not speak TLS; --insecure also skips certificate checks, as docker's insecure-registries do).
Blob redirects to another origin (scheme, host, port) drop the Authorization header (storage URLs carry their own
signature); a redirect from https to plain http is refused.
A bearer challenge's token realm is followed over https only (plain http as for the registry itself: a loopback
registry and realm, or --insecure); the login goes only to a realm on the registry's own host or one the user
allows (auth.may_receive_login), any other host is asked for an anonymous token.
"""

from __future__ import annotations

import dataclasses
import http.client
import socket
import ssl
import threading
import urllib.parse
from typing import Callable

from infra_cli.image import auth
from infra_cli.image.blob import RAW_CHUNK, Descriptor, overrun
from infra_cli.image.strict_json import json_type, load_object, malformed
from infra_cli.image.errors import ImageReadError
from infra_cli.image.limits import MAX_DOCUMENT_BYTES, MAX_SMALL_ANSWER_BYTES, NO_DEADLINE, Deadline
from infra_cli.image.manifest import ACCEPT
from infra_cli.image.reference import RegistryReference

TIMEOUT_S = 60           # one socket operation; the whole check is bounded by its Deadline
MAX_REDIRECTS = 5
MAX_DRAINED_BYTES = 64 << 10   # a redirect's or challenge's body read to reuse the connection; more: hang up
USER_AGENT = "infra-image-check/0.1"


def _token_text(value: object, what: str, where: str) -> str:
    """A token out of an auth answer. It is a secret: a wrong type is reported by its type, never its value."""
    if not isinstance(value, str):
        raise malformed(what, f"its token is {json_type(value)} where a string belongs", where)
    return value


class _Answer:
    """A response whose body is read under the deadline (a read the watchdog cut short says so) and never
    past the size it may have."""

    def __init__(self, resp: http.client.HTTPResponse, doing: str, deadline: Deadline, discard: Callable[[], None]):
        self._resp, self.doing, self._deadline, self._discard = resp, doing, deadline, discard
        self.status, self.getheader = resp.status, resp.getheader
        self._complete = False

    def read(self, n: int = RAW_CHUNK) -> bytes:
        self._deadline.check(self.doing)
        try:
            data = self._resp.read(n) if n else b""
        except (OSError, http.client.HTTPException) as exc:
            self._deadline.check(self.doing)      # the watchdog hung up on it: say so, not what that broke
            raise ImageReadError(f"{self.doing} failed: {exc or type(exc).__name__}",
                                 "the connection dropped; retry") from None
        self._deadline.check(self.doing)          # what a read cut short by the watchdog returned is not data
        if not data and n:
            self._complete = True
            self._resp.close()      # marks it read: the connection is reused
        return data

    def body(self, limit: int, over: Callable[[], ImageReadError] | None = None) -> bytes:
        """The body, at most `limit` bytes: past it, `over()` is raised, or without `over` the rest is cut off."""
        declared = self.getheader("Content-Length")
        if over is not None and declared and declared.isdigit() and int(declared) > limit:
            self.close()
            raise over()
        parts: list[bytes] = []
        have = 0
        while have <= limit:
            data = self.read(min(RAW_CHUNK, limit + 1 - have))
            if not data:
                return b"".join(parts)
            parts.append(data)
            have += len(data)
        self.close()
        if over is not None:
            raise over()
        return b"".join(parts)[:limit]

    def drain(self) -> None:
        """Read a body nobody needs (a redirect's, a challenge's), so the connection can be reused."""
        self.body(MAX_DRAINED_BYTES)
        self.close()

    def close(self) -> None:
        if not self._complete:      # unread bytes would be taken for the next response: hang up instead
            self._discard()
        self._resp.close()


class _Connection(http.client.HTTPConnection):
    """A connection whose socket is handed to `track` (so that the deadline's watchdog can shut it)."""

    def __init__(self, host: str, timeout: float, track: Callable[[socket.socket], None]):
        super().__init__(host, timeout=timeout)
        self._track = track

    def connect(self) -> None:
        super().connect()
        self._track(self.sock)


class _TLSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, timeout: float, context: ssl.SSLContext, track: Callable[[socket.socket], None]):
        super().__init__(host, timeout=timeout, context=context)
        self._tls_context, self._track = context, track

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        # tracked before the handshake, which a hostile server could trickle too
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self.host, do_handshake_on_connect=False)
        self._track(self.sock)
        self.sock.do_handshake()


def _origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin as browsers compare them (RFC 6454): scheme, host (lower case) and port (the scheme's
    default when absent)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1     # not a port: equal to no origin credentials were given for
    return scheme, (parts.hostname or "").lower(), port or {"https": 443, "http": 80}.get(scheme)


class RegistryStore:
    def __init__(self, ref: RegistryReference, *, insecure: bool = False, credential=None,
                 deadline: Deadline = NO_DEADLINE):
        self.ref, self.insecure = ref, insecure
        self.description = str(ref)
        self._aad_credential = credential
        self._deadline = deadline
        self._scheme: str | None = None
        self._authorization: str | None = None
        self._withheld_from: str | None = None    # the token realm's host the login was not sent to
        self._lock = threading.Lock()
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []    # every thread's, to close at the end
        self._sockets: list[socket.socket] = []                # every socket, for the watchdog
        self._opened_lock = threading.Lock()
        self._closed = False
        left = deadline.remaining()
        # At the deadline every socket is shut: whatever read, handshake or header line a server is
        # trickling ends there, in whichever thread waits on it.
        self._watchdog = threading.Timer(max(left, 0), self._hang_up) if left is not None else None
        if self._watchdog:
            self._watchdog.daemon = True
            self._watchdog.start()

    # ---- connections -------------------------------------------------------------------------------
    def _track(self, sock: socket.socket) -> None:
        with self._opened_lock:
            self._sockets.append(sock)
            shut = self._closed or self._deadline.expired()
        if shut:
            _shut(sock)

    def _hang_up(self) -> None:
        with self._opened_lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def _connect(self, scheme: str, host: str) -> http.client.HTTPConnection:
        if scheme == "http":
            return _Connection(host, TIMEOUT_S, self._track)
        ctx = ssl.create_default_context()
        if self.insecure:
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        return _TLSConnection(host, TIMEOUT_S, ctx, self._track)

    def _conn(self, scheme: str, host: str) -> http.client.HTTPConnection:
        pool = self._local.__dict__.setdefault("pool", {})
        conn = pool.get((scheme, host))
        if conn is None:
            conn = pool[(scheme, host)] = self._connect(scheme, host)
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    def _send(self, method: str, url: str, headers: dict, body: bytes | None = None) -> _Answer:
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        doing = f"waiting for registry {self.ref.host}: {method} {url.split('?')[0]}"
        key = (parts.scheme, parts.netloc)

        def discard() -> None:
            self._local.pool.pop(key, None)
            conn.close()

        for attempt in (0, 1):     # a kept-alive connection the server closed: reconnect once
            if self._closed:
                raise ImageReadError(f"{doing}: the check has ended", None)
            self._deadline.check(doing)
            conn = self._conn(*key)
            # connecting is not watched (the socket is not ours yet): it may take only the time left
            conn.timeout = self._deadline.wait_s(TIMEOUT_S) + 0.05
            try:
                conn.request(method, path, body=body, headers={"User-Agent": USER_AGENT, **headers})
                return _Answer(conn.getresponse(), doing, self._deadline, discard)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                discard()
                self._deadline.check(doing)
                if attempt:
                    raise
            except (OSError, http.client.HTTPException):
                discard()
                self._deadline.check(doing)
                raise
        raise AssertionError("unreachable")

    def _base(self) -> str:
        with self._lock:
            if self._scheme is None:
                self._scheme = self._probe_scheme()
        return f"{self._scheme}://{self.ref.host}"

    def _probe_scheme(self) -> str:
        if not (self.ref.is_loopback or self.insecure):
            return "https"
        try:
            self._send("GET", f"https://{self.ref.host}/v2/", {}).drain()
            return "https"
        except (ssl.SSLError, ConnectionError, http.client.HTTPException):
            return "http"
        except OSError:    # e.g. no TLS answer at all: plain http is tried, and says what is wrong
            self._deadline.check(f"waiting for registry {self.ref.host}: GET https://{self.ref.host}/v2/")
            return "http"

    # ---- requests with auth and redirects ---------------------------------------------------------
    def _get(self, path: str, accept: str | None = None) -> _Answer:
        try:
            url = self._base() + path
            resp = self._follow(url, accept)
            if resp.status == 401:
                challenge = resp.getheader("WWW-Authenticate") or ""
                resp.drain()
                self._login(challenge)
                resp = self._follow(url, accept)
        except (OSError, http.client.HTTPException) as exc:
            raise ImageReadError(f"cannot reach registry {self.ref.host}: {exc}",
                                 "check the host and port; plain http is used only for loopback or with --insecure",
                                 where=self.description) from None
        if resp.status != 200:
            detail = resp.body(2048).decode("utf-8", "replace").strip()
            resp.close()
            hint = {401: "log in (docker login / az acr login) or check the credentials in ~/.docker/config.json",
                    403: "the credentials lack pull permission on this repository",
                    404: "check the repository name and tag (or digest)"}.get(resp.status, "retry later")
            if resp.status in (401, 403) and self._withheld_from:
                hint = self._withheld_hint()
            raise ImageReadError(f"{self.ref.host}{path.split('?')[0]} answered HTTP {resp.status}: {detail[:300]}",
                                 hint, where=self.description)
        return resp

    def _follow(self, url: str, accept: str | None) -> _Answer:
        """GET `url`, following redirects: the Authorization header goes only to the exact origin (scheme, host,
        port) it was obtained for, never to storage elsewhere (whose URLs carry their own signature); a redirect
        from https to plain http, or to any other scheme, is refused (it would carry the request in clear)."""
        own_origin = _origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            headers = {"Accept": accept} if accept else {}
            if self._authorization and _origin(url) == own_origin:
                headers["Authorization"] = self._authorization
            resp = self._send("GET", url, headers)
            if resp.status not in (301, 302, 303, 307, 308):
                return resp
            location = resp.getheader("Location") or ""
            resp.drain()
            target = urllib.parse.urljoin(url, location)
            scheme, was = urllib.parse.urlsplit(target).scheme.lower(), urllib.parse.urlsplit(url).scheme.lower()
            if scheme not in ("https", "http") or (was == "https" and scheme == "http"):
                raise ImageReadError(f"registry {self.ref.host} redirected {url.split('?')[0]} to "
                                     f"{target.split('?')[0][:200]!r}, which leaves https: infra follows no "
                                     "redirect from https to plain http (or to another scheme)",
                                     "the registry or its storage is misconfigured (or the connection tampered "
                                     "with); ask its operator to redirect to https", where=self.description)
            url = target
        raise ImageReadError(f"too many redirects fetching from {self.ref.host}", None, where=self.description)

    def _login(self, challenge: str) -> None:
        scheme, params = auth.parse_challenge(challenge)
        creds = auth.lookup_credentials(self.ref.host, timeout_s=self._deadline.wait_s(auth.HELPER_TIMEOUT_S))
        self._deadline.check(f"looking up credentials for {self.ref.host}")
        if scheme == "basic":
            basic = creds.basic() if creds else None
            if not basic:
                raise ImageReadError(f"registry {self.ref.host} wants a username and password",
                                     "docker login (or skopeo login) to it first", where=self.description)
            self._authorization = basic
            return
        if scheme != "bearer" or "realm" not in params:
            raise ImageReadError(f"registry {self.ref.host} asked for unsupported authentication {scheme!r}",
                                 "use a registry with basic or bearer token auth", where=self.description)
        realm = params["realm"]
        if not self._realm_may_receive_login(realm):
            self._withheld_from, creds = urllib.parse.urlsplit(realm).hostname, None
        scope = params.get("scope") or f"repository:{self.ref.repository}:pull"
        service = params.get("service", self.ref.hostname)
        if creds is None and not self._withheld_from and auth.is_acr(self.ref.hostname):
            creds = auth.Credentials(identity_token=self._acr_refresh_token(service, realm))
        self._authorization = "Bearer " + self._token(realm, service, scope, creds)

    def _realm_may_receive_login(self, realm: str) -> bool:
        """Refuse a token realm that is not https (plain http only where the registry itself may be: a loopback
        registry and realm, or --insecure); say whether it may be sent the login (auth.may_receive_login)."""
        parts = urllib.parse.urlsplit(realm)
        shown = "".join(c if c.isprintable() else "?" for c in realm.split("?")[0][:200])
        why = None
        try:
            realm_ref = dataclasses.replace(self.ref, host=parts.netloc)
            if parts.scheme not in ("https", "http") or not parts.hostname or "@" in parts.netloc:
                why = "is not an https URL of a host"
            elif parts.scheme == "http" and not (self.insecure or (self.ref.is_loopback and realm_ref.is_loopback)):
                why = "is plain http: the login and token would travel in clear text"
        except ValueError:     # a port that is not a number
            why = "is not an https URL of a host"
        if why:
            raise ImageReadError(f"registry {self.ref.host} names the token realm {shown}, which {why}",
                                 "a token service is followed over https only (plain http only for a loopback "
                                 "registry and token service, or with --insecure); check the registry's address",
                                 where=self.description)
        assert parts.hostname     # a realm without a host was refused above
        return auth.may_receive_login(parts.hostname, parts.netloc, self.ref.hostname)

    def _withheld_hint(self) -> str:
        return (f"your login for {self.ref.host} was not sent to its token service on {self._withheld_from}, another "
                f"host; if that host is the registry's own token service, allow it: "
                f"{auth.TOKEN_HOSTS_ENV}={self._withheld_from}")

    def _small_answer(self, resp: _Answer, url: str) -> bytes:
        """A token service's answer, at most MAX_SMALL_ANSWER_BYTES."""
        what = f"the answer of {url.split('?')[0]}"
        return resp.body(MAX_SMALL_ANSWER_BYTES, lambda: malformed(
            what, f"it is larger than the {MAX_SMALL_ANSWER_BYTES >> 20} MiB bound for a token answer", self.description))

    def _post_form(self, url: str, form: dict) -> dict:
        body = urllib.parse.urlencode(form).encode()
        resp = self._send("POST", url, {"Content-Type": "application/x-www-form-urlencoded"}, body)
        data = self._small_answer(resp, url)
        if resp.status != 200:
            raise ImageReadError(f"{urllib.parse.urlsplit(url).netloc} refused the token request (HTTP {resp.status})",
                                 "check your login (docker login / az acr login / az login)", where=self.description)
        return load_object(data, f"the answer of {url.split('?')[0]}", self.description)

    def _token(self, realm: str, service: str, scope: str, creds: auth.Credentials | None) -> str:
        if creds and creds.identity_token:     # OAuth2 refresh token (docker's identitytoken, ACR)
            data = self._post_form(realm, {"grant_type": "refresh_token", "service": service, "scope": scope,
                                           "refresh_token": creds.identity_token, "client_id": USER_AGENT})
        else:
            query = urllib.parse.urlencode({"service": service, "scope": scope})
            headers = {"Authorization": creds.basic()} if creds and creds.basic() else {}
            url = f"{realm}{'&' if '?' in realm else '?'}{query}"
            resp = self._send("GET", url, headers)
            raw = self._small_answer(resp, url)
            if resp.status != 200:
                raise ImageReadError(f"the token service of {self.ref.host} refused (HTTP {resp.status})",
                                     self._withheld_hint() if self._withheld_from else
                                     "docker login to the registry, or check that the repository exists",
                                     where=self.description)
            data = load_object(raw, f"the answer of {realm}", self.description)
        token = data.get("token") or data.get("access_token")
        if not token:
            raise ImageReadError(f"the token service of {self.ref.host} returned no token", None, where=self.description)
        return _token_text(token, f"the answer of {realm}", self.description)

    def _acr_refresh_token(self, service: str, realm: str) -> str:
        """Azure AD token -> ACR refresh token via POST /oauth2/exchange (ACR's documented AAD flow)."""
        aad, tenant = _within(self._deadline, lambda: auth.aad_access_token(self._aad_credential, self.ref.hostname),
                              f"getting an Azure AD token for {self.ref.host}")
        form = {"grant_type": "access_token", "service": service, "access_token": aad}
        if tenant:
            form["tenant"] = tenant
        base = urllib.parse.urlsplit(realm)
        exchange = f"{base.scheme}://{base.netloc}/oauth2/exchange"
        data = self._post_form(exchange, form)
        if not data.get("refresh_token"):
            raise ImageReadError(f"{self.ref.host} returned no refresh token for the Azure AD token",
                                 "grant your identity AcrPull on the registry", where=self.description)
        return _token_text(data["refresh_token"], f"the answer of {exchange}", self.description)

    # ---- the store interface ------------------------------------------------------------------------
    def _manifest(self, reference: str) -> tuple[bytes, str, str | None]:
        resp = self._get(f"/v2/{self.ref.repository}/manifests/{reference}", ACCEPT)
        data = resp.body(MAX_DOCUMENT_BYTES, lambda: ImageReadError(
            f"the manifest {reference} of {self.ref.host}/{self.ref.repository} is over the "
            f"{MAX_DOCUMENT_BYTES >> 20} MiB bound for a manifest", "the registry is not serving an image manifest",
            where=self.description))
        return data, resp.getheader("Content-Type") or "", resp.getheader("Docker-Content-Digest")

    def root(self) -> tuple[bytes, str, str | None]:
        data, kind, header_digest = self._manifest(self.ref.reference)
        # a digest we asked for is verified; a tag's digest is the registry's word for it
        return data, kind, self.ref.digest or (header_digest if header_digest and header_digest.startswith("sha256:") else None)

    def manifest(self, digest: str) -> tuple[bytes, str]:
        data, kind, _ = self._manifest(digest)
        return data, kind

    def open_blob(self, desc: Descriptor) -> _Answer:
        resp = self._get(f"/v2/{self.ref.repository}/blobs/{desc.digest}")
        declared = resp.getheader("Content-Length")
        if desc.size >= 0 and declared and declared.isdigit() and int(declared) > desc.size:
            resp.close()     # refused before a byte is read; the reader caps bodies without a length too
            raise overrun(f"blob (Content-Length {declared})", desc.digest, desc.size)
        return resp

    def close(self) -> None:
        """Hang up on everything: a thread still reading a socket of this store is woken at once."""
        with self._opened_lock:
            self._closed = True
            opened, self._opened = self._opened, []
        if self._watchdog:
            self._watchdog.cancel()
        self._hang_up()
        for conn in opened:
            conn.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:        # already closed, or detached by the TLS wrapper
        pass


def _within(deadline: Deadline, call: Callable, doing: str):
    """`call()` in a helper thread, waited for only until the deadline (SDK calls take no deadline of ours)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:   # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(deadline.remaining())
    if worker.is_alive():
        raise deadline.error(doing)
    if "error" in box:
        raise box["error"]
    return box["value"]
