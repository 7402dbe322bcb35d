"""Registry auth against a real exchange: a small token-protected front (bearer challenge, token endpoint,
ACR's /oauth2/exchange, cross-host blob redirects) proxying to the real docker-registry."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from image_fixtures import images, registry  # noqa: F401 (fixtures)
from infra_cli.image import auth
from infra_cli.image.check import check_store
from infra_cli.image.errors import ImageReadError
from infra_cli.image.reference import parse_reference
from infra_cli.image.registry import RegistryStore
from infra_cli.knowledge.requirements import parse_requirement

USER, PASSWORD, TOKEN = "ci-bot", "s3cret-pa55", "tok-0123456789"
AAD, REFRESH = "aad-token-xyz", "acr-refresh-abc"


class Front(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, mode: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream, self.mode = upstream, mode
        self.port = self.server_address[1]
        self.raw: dict[str, bytes] = {}       # "token", "manifest", "exchange": a body sent as is (malformed ones)
        self.log: list[tuple[str, str, str | None]] = []     # (method, path, Authorization)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _Handler(BaseHTTPRequestHandler):
    server: Front

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _raw(self, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _proxy(self, path: str) -> None:
        request = urllib.request.Request(f"http://{self.server.upstream}{path}",
                                         headers={"Accept": self.headers.get("Accept", "*/*")})
        with urllib.request.urlopen(request) as resp:
            data = resp.read()
            self.send_response(resp.status)
            for key in ("Content-Type", "Docker-Content-Digest"):
                if resp.headers.get(key):
                    self.send_header(key, resp.headers[key])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        s, authz = self.server, self.headers.get("Authorization")
        s.log.append(("GET", self.path, authz))
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/token":
            query = dict(urllib.parse.parse_qsl(url.query))
            expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            if authz != expected or query.get("scope") != "repository:test/openmpi:pull":
                return self._json(401, {"errors": [{"code": "UNAUTHORIZED"}]})
            if "token" in s.raw:
                return self._raw(s.raw["token"])
            return self._json(200, {"token": TOKEN})
        if url.path.startswith("/redirected/"):
            return self._proxy(url.path[len("/redirected"):])
        if authz != f"Bearer {TOKEN}":
            realm = f"http://127.0.0.1:{s.port}/" + ("oauth2/token" if s.mode == "acr" else "token")
            challenge = f'Bearer realm="{realm}",service="front",scope="repository:test/openmpi:pull"'
            return self._json(401, {"errors": [{"code": "UNAUTHORIZED"}]}, {"WWW-Authenticate": challenge})
        if "/blobs/" in url.path:    # storage lives elsewhere: another host name, its own (absent) auth
            self.send_response(307)
            self.send_header("Location", f"http://localhost:{s.port}/redirected{url.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if "/manifests/" in url.path and "manifest" in s.raw:    # no Docker-Content-Digest: a tag's manifest as is
            return self._raw(s.raw["manifest"], "application/vnd.oci.image.manifest.v1+json")
        self._proxy(url.path)

    def do_POST(self):
        s = self.server
        form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
        s.log.append(("POST", self.path, json.dumps(sorted(form))))
        if self.path == "/oauth2/exchange" and form.get("grant_type") == "access_token" and form.get("access_token") == AAD:
            if "exchange" in s.raw:
                return self._raw(s.raw["exchange"])
            return self._json(200, {"refresh_token": REFRESH})
        if (self.path == "/oauth2/token" and form.get("grant_type") == "refresh_token"
                and form.get("refresh_token") == REFRESH and form.get("scope") == "repository:test/openmpi:pull"):
            return self._json(200, {"access_token": TOKEN})
        return self._json(401, {"errors": [{"code": "UNAUTHORIZED"}]})


@pytest.fixture
def front(images):
    servers = []

    def make(mode: str) -> Front:
        servers.append(Front(images.registry.host, mode))
        return servers[-1]

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


def _docker_config(tmp_path: Path, host: str | None) -> Path:
    auths = {host: {"auth": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}} if host else {}
    (tmp_path / "config.json").write_text(json.dumps({"auths": auths}))
    return tmp_path


def _isolated_env(tmp_path: Path, host: str | None) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR")}
    env["DOCKER_CONFIG"] = str(_docker_config(tmp_path, host))
    return env


def test_bearer_token_flow_with_docker_config_and_redirect_drops_authorization(front, tmp_path):
    f = front("bearer")
    ref = f"127.0.0.1:{f.port}/test/openmpi:oci"
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", ref, "--json"], capture_output=True,
                          text=True, env=_isolated_env(tmp_path, f"127.0.0.1:{f.port}"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["requirements"][0]["met"]
    for secret in (PASSWORD, TOKEN, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()):
        assert secret not in proc.stdout + proc.stderr
    redirected = [entry for entry in f.log if entry[1].startswith("/redirected/")]
    assert redirected and all(authz is None for _, _, authz in redirected)
    assert any(p == "/token" or p.startswith("/token?") for _, p, _ in f.log)


def test_bearer_flow_without_credentials_is_exit_2_with_login_hint(front, tmp_path):
    f = front("bearer")
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", f"127.0.0.1:{f.port}/test/openmpi:oci"],
                          capture_output=True, text=True, env=_isolated_env(tmp_path, None), timeout=120)
    assert proc.returncode == 2 and "refused" in proc.stderr and "docker login" in proc.stderr
    assert "Traceback" not in proc.stderr


class _AadCredential:
    """An azure-identity style credential (get_token) holding a fixed AAD token."""

    def get_token(self, *scopes: str):
        assert scopes == ("https://management.azure.com/.default",)   # 127.0.0.1 stands in for *.azurecr.io
        from azure.core.credentials import AccessToken

        return AccessToken(AAD, 2**31)


def test_acr_aad_exchange_flow(front, tmp_path, monkeypatch):
    f = front("acr")
    monkeypatch.setattr(auth, "ACR_SUFFIXES", ("127.0.0.1",))   # the test registry stands in for *.azurecr.io
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, None)))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    store = RegistryStore(parse_reference(f"127.0.0.1:{f.port}/test/openmpi:oci"), credential=_AadCredential())
    result = check_store(store, [parse_requirement("openmpi>=4.1")])
    assert result.ok
    posts = [(p, body) for m, p, body in f.log if m == "POST"]
    assert posts[0][0] == "/oauth2/exchange" and posts[1][0] == "/oauth2/token"


def test_docker_config_lookup_forms(tmp_path, monkeypatch):
    config = {"auths": {"https://index.docker.io/v1/": {"auth": base64.b64encode(b"hub:pw").decode()},
                        "myacr.azurecr.io": {"identitytoken": "rt"},
                        "example.com:5000": {"username": "u", "password": "p"}}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert auth.lookup_credentials("registry-1.docker.io") == auth.Credentials("hub", "pw")
    assert auth.lookup_credentials("myacr.azurecr.io") == auth.Credentials(identity_token="rt")
    assert auth.lookup_credentials("example.com:5000") == auth.Credentials("u", "p")
    assert auth.lookup_credentials("other.io") is None
    assert auth.parse_challenge('Bearer realm="https://a/t",service="s",scope="repository:x:pull"') == (
        "bearer", {"realm": "https://a/t", "service": "s", "scope": "repository:x:pull"})


@pytest.mark.parametrize("body, why", [
    (b"<html>gateway</html>", "is malformed: not valid JSON"),
    (b"[]", "is malformed: it is a list where a JSON object belongs"),
    (json.dumps({"token": 12345}).encode(), "is malformed: its token is a number where a string belongs"),
])
def test_malformed_token_answer_is_exit_2_naming_the_token_service(front, tmp_path, body, why):
    f = front("bearer")
    f.raw["token"] = body
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", f"127.0.0.1:{f.port}/test/openmpi:oci"],
                          capture_output=True, text=True, env=_isolated_env(tmp_path, f"127.0.0.1:{f.port}"), timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"the answer of http://127.0.0.1:{f.port}/token {why}" in proc.stderr, proc.stderr
    assert "12345" not in proc.stderr        # a token is a secret, even a malformed one


def test_malformed_acr_exchange_answer_is_exit_2(front, tmp_path, monkeypatch):
    f = front("acr")
    f.raw["exchange"] = json.dumps({"refresh_token": ["x"]}).encode()
    monkeypatch.setattr(auth, "ACR_SUFFIXES", ("127.0.0.1",))
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, None)))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    store = RegistryStore(parse_reference(f"127.0.0.1:{f.port}/test/openmpi:oci"), credential=_AadCredential())
    with pytest.raises(ImageReadError, match=r"oauth2/exchange is malformed: its token is a list"):
        check_store(store, [parse_requirement("openmpi")])


def test_malformed_manifest_from_a_registry_is_exit_2_naming_the_image(front, tmp_path):
    f = front("bearer")
    f.raw["manifest"] = json.dumps({"schemaVersion": 2, "config": {"digest": "sha256:" + "0" * 64, "size": 2},
                                    "layers": {"not": "a list"}}).encode()
    ref = f"127.0.0.1:{f.port}/test/openmpi:oci"
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", ref, "--json"], capture_output=True,
                          text=True, env=_isolated_env(tmp_path, f"127.0.0.1:{f.port}"), timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    error = json.loads(proc.stdout)["errors"][0]
    assert error["file"] == ref and error["message"] == "the manifest is malformed: 'layers' is an object where a list belongs"


@pytest.mark.parametrize("config", [
    [], {"auths": ["x"]}, {"auths": {"example.com:5000": "x"}}, {"credHelpers": ["x"]},
    {"auths": {"example.com:5000": {"auth": "abc"}}},          # not base64 (bad padding)
    {"auths": {"example.com:5000": {"auth": "/w=="}}},         # base64 of bytes that are not text
    {"auths": {"example.com:5000": {"auth": 5, "identitytoken": ["x"], "username": {}}}},
])
def test_malformed_docker_config_reads_as_no_login(tmp_path, monkeypatch, config):
    """As an unreadable config.json already was: the registry's 401 then says to log in."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert auth.lookup_credentials("example.com:5000") is None
