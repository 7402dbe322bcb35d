"""A registry as an image store: the OCI distribution API over http.client, with auth and redirects.

https always, except for loopback registries and `--insecure` (then https is tried first, and http if the
server does not speak TLS; --insecure also skips certificate checks, as docker's insecure-registries do).
Blob redirects to another host drop the Authorization header (storage URLs carry their own signature).
"""

from __future__ import annotations

import http.client
import ssl
import threading
import urllib.parse
from typing import BinaryIO

from infra_cli.image import auth
from infra_cli.image.blob import Descriptor
from infra_cli.image.document import json_type, load_object, malformed
from infra_cli.image.errors import ImageReadError
from infra_cli.image.manifest import ACCEPT, MAX_MANIFEST_BYTES
from infra_cli.image.reference import RegistryReference

TIMEOUT_S = 60
MAX_REDIRECTS = 5
USER_AGENT = "infra-image-check/0.1"


def _token_text(value: object, what: str, where: str) -> str:
    """A token out of an auth answer. It is a secret: a wrong type is reported by its type, never its value."""
    if not isinstance(value, str):
        raise malformed(what, f"its token is {json_type(value)} where a string belongs", where)
    return value


class RegistryStore:
    def __init__(self, ref: RegistryReference, *, insecure: bool = False, credential=None):
        self.ref, self.insecure = ref, insecure
        self.description = str(ref)
        self._aad_credential = credential
        self._scheme: str | None = None
        self._authorization: str | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []    # every thread's, to close at the end
        self._opened_lock = threading.Lock()

    # ---- connections -------------------------------------------------------------------------------
    def _connect(self, scheme: str, host: str) -> http.client.HTTPConnection:
        if scheme == "http":
            return http.client.HTTPConnection(host, timeout=TIMEOUT_S)
        ctx = ssl.create_default_context()
        if self.insecure:
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        return http.client.HTTPSConnection(host, timeout=TIMEOUT_S, context=ctx)

    def _conn(self, scheme: str, host: str) -> http.client.HTTPConnection:
        pool = self._local.__dict__.setdefault("pool", {})
        conn = pool.get((scheme, host))
        if conn is None:
            conn = pool[(scheme, host)] = self._connect(scheme, host)
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    def _send(self, method: str, url: str, headers: dict, body: bytes | None = None) -> http.client.HTTPResponse:
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        for attempt in (0, 1):     # a kept-alive connection the server closed: reconnect once
            conn = self._conn(parts.scheme, parts.netloc)
            try:
                conn.request(method, path, body=body, headers={"User-Agent": USER_AGENT, **headers})
                return conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                self._local.pool.pop((parts.scheme, parts.netloc), None)
                if attempt:
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
            resp = self._send("GET", f"https://{self.ref.host}/v2/", {})
            resp.read()
            return "https"
        except (ssl.SSLError, ConnectionError, http.client.HTTPException):
            return "http"

    # ---- requests with auth and redirects ---------------------------------------------------------
    def _get(self, path: str, accept: str | None = None) -> http.client.HTTPResponse:
        url = self._base() + path
        try:
            resp = self._follow(url, accept)
            if resp.status == 401:
                challenge = resp.getheader("WWW-Authenticate") or ""
                resp.read()
                self._login(challenge)
                resp = self._follow(url, accept)
        except (OSError, http.client.HTTPException) as exc:
            raise ImageReadError(f"cannot reach registry {self.ref.host}: {exc}",
                                 "check the host and port; plain http is used only for loopback or with --insecure",
                                 where=self.description) from None
        if resp.status != 200:
            detail = resp.read(2048).decode("utf-8", "replace").strip()
            hint = {401: "log in (docker login / az acr login) or check the credentials in ~/.docker/config.json",
                    403: "the credentials lack pull permission on this repository",
                    404: "check the repository name and tag (or digest)"}.get(resp.status, "retry later")
            raise ImageReadError(f"{self.ref.host}{path.split('?')[0]} answered HTTP {resp.status}: {detail[:300]}",
                                 hint, where=self.description)
        return resp

    def _follow(self, url: str, accept: str | None) -> http.client.HTTPResponse:
        own_host = urllib.parse.urlsplit(url).netloc
        for _ in range(MAX_REDIRECTS + 1):
            headers = {"Accept": accept} if accept else {}
            if self._authorization and urllib.parse.urlsplit(url).netloc == own_host:
                headers["Authorization"] = self._authorization
            resp = self._send("GET", url, headers)
            if resp.status not in (301, 302, 303, 307, 308):
                return resp
            location = resp.getheader("Location") or ""
            resp.read()
            url = urllib.parse.urljoin(url, location)
        raise ImageReadError(f"too many redirects fetching from {self.ref.host}", None, where=self.description)

    def _login(self, challenge: str) -> None:
        scheme, params = auth.parse_challenge(challenge)
        creds = auth.lookup_credentials(self.ref.host)
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
        scope = params.get("scope") or f"repository:{self.ref.repository}:pull"
        service = params.get("service", self.ref.hostname)
        if creds is None and auth.is_acr(self.ref.hostname):
            creds = auth.Credentials(identity_token=self._acr_refresh_token(service, params["realm"]))
        self._authorization = "Bearer " + self._token(params["realm"], service, scope, creds)

    def _post_form(self, url: str, form: dict) -> dict:
        body = urllib.parse.urlencode(form).encode()
        resp = self._send("POST", url, {"Content-Type": "application/x-www-form-urlencoded"}, body)
        data = resp.read(MAX_MANIFEST_BYTES)
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
            resp = self._send("GET", f"{realm}{'&' if '?' in realm else '?'}{query}", headers)
            raw = resp.read(MAX_MANIFEST_BYTES)
            if resp.status != 200:
                raise ImageReadError(f"the token service of {self.ref.host} refused (HTTP {resp.status})",
                                     "docker login to the registry, or check that the repository exists",
                                     where=self.description)
            data = load_object(raw, f"the answer of {realm}", self.description)
        token = data.get("token") or data.get("access_token")
        if not token:
            raise ImageReadError(f"the token service of {self.ref.host} returned no token", None, where=self.description)
        return _token_text(token, f"the answer of {realm}", self.description)

    def _acr_refresh_token(self, service: str, realm: str) -> str:
        """Azure AD token -> ACR refresh token via POST /oauth2/exchange (ACR's documented AAD flow)."""
        aad, tenant = auth.aad_access_token(self._aad_credential)
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
        data = resp.read(MAX_MANIFEST_BYTES + 1)
        return data, resp.getheader("Content-Type") or "", resp.getheader("Docker-Content-Digest")

    def root(self) -> tuple[bytes, str, str | None]:
        data, kind, header_digest = self._manifest(self.ref.reference)
        # a digest we asked for is verified; a tag's digest is the registry's word for it
        return data, kind, self.ref.digest or (header_digest if header_digest and header_digest.startswith("sha256:") else None)

    def manifest(self, digest: str) -> tuple[bytes, str]:
        data, kind, _ = self._manifest(digest)
        return data, kind

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        return self._get(f"/v2/{self.ref.repository}/blobs/{desc.digest}")

    def close(self) -> None:
        with self._opened_lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()
