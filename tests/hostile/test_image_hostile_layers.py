"""Hostile images no runtime can unpack, and registries whose token realm would take credentials elsewhere
(issue 22, items 6 and 9): `infra image check` must refuse them (exit 2, naming the layer, member, descriptor
or realm), never prove Open MPI from them.

Layers are crafted by hand with test_image_hostile's helpers; the registry is a small loopback HTTP server.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_fixtures import point_tag, write_blob  # noqa: E402
from test_image_hostile import (CONFIG, END, LAYER, MANIFEST, ROOT, _digest, check, entry, layout_with,  # noqa: E402
                                refused, tar_header)

# What proves Open MPI to validators/image_evidence.yaml: mpirun on PATH (/usr/bin in layout_with's config),
# libmpi.so.40 and libopen-pal.so beside it.
EVIDENCE = ("usr/bin/mpirun", "usr/lib/libmpi.so.40", "usr/lib/libopen-pal.so.40")


def files(*names: str) -> bytes:
    return b"".join(entry(n.encode(), b"\x7fELF") for n in names)


def hardlink(path: str, target: str) -> bytes:
    """A type-1 entry whose link name is `target`, with a correct header checksum."""
    h = bytearray(tar_header(path.encode(), 0, b"1"))
    h[157:157 + len(target)] = target.encode()
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def layer(*parts: bytes, end: bytes = END) -> bytes:
    return gzip.compress(b"".join(parts) + end)


def ok(tmp_path: Path, ref: str) -> dict:
    code, doc, _, _ = check(tmp_path, ref)
    assert code == 0, (code, doc)
    return doc


# ---- hard links -------------------------------------------------------------------------------------------

def test_hardlinks_to_members_that_do_not_exist_prove_nothing(tmp_path):
    """Every evidence path a hard link to a member nowhere in the image: tar (and every runtime) fails to
    extract it; it proved Open MPI (exit 0)."""
    ref = layout_with(tmp_path, [layer(*(hardlink(p, f"nowhere/{i}") for i, p in enumerate(EVIDENCE)))])
    message = refused(tmp_path, ref, why="hard link to /nowhere/0")
    assert "layer 1 of 1" in message and "/usr/bin/mpirun" in message, message


def test_dangling_hardlinks_in_the_top_layer_are_not_skipped_by_early_exit(tmp_path):
    """The top layer alone decides the verdict, so lower layers went unread: its links must still resolve."""
    ref = layout_with(tmp_path, [layer(files("etc/os-release")),
                                 layer(*(hardlink(p, f"nowhere/{i}") for i, p in enumerate(EVIDENCE)))])
    message = refused(tmp_path, ref, why="hard link to /nowhere/0")
    assert "layer 2 of 2" in message and "/usr/bin/mpirun" in message, message


def test_hardlink_to_a_later_member_of_its_layer_is_unreadable(tmp_path):
    """tar extracts in order: the target must exist when the link is made."""
    ref = layout_with(tmp_path, [layer(hardlink("usr/bin/mpirun", "opt/mpirun"), files("opt/mpirun", *EVIDENCE[1:]))])
    refused(tmp_path, ref, why="hard link to /opt/mpirun")


def test_hardlink_to_a_directory_is_unreadable(tmp_path):
    ref = layout_with(tmp_path, [layer(entry(b"opt/", b"", b"5"), hardlink("usr/bin/mpirun", "opt"),
                                       files(*EVIDENCE[1:]))])
    refused(tmp_path, ref, why="hard link to /opt, a directory")


def test_hardlink_out_of_the_root_is_unreadable(tmp_path):
    ref = layout_with(tmp_path, [layer(files("etc/passwd"), hardlink("usr/bin/mpirun", "../../etc/passwd"),
                                       files(*EVIDENCE[1:]))])
    refused(tmp_path, ref, why="outside the image")


def test_hardlinks_to_earlier_members_and_to_lower_layers_are_read(tmp_path):
    """What tar writers and runtimes do: a link to an earlier member of its layer, or (OCI layer.md, Hardlinks)
    to a file a lower layer holds."""
    same = layout_with(tmp_path, [layer(files("opt/mpirun"), hardlink("./usr/bin/mpirun", "./opt/mpirun"),
                                        files(*EVIDENCE[1:]))], tag="same")
    doc = ok(tmp_path, same)
    assert doc["requirements"][0]["met"], doc
    lower = layout_with(tmp_path, [layer(files("opt/mpirun", "opt/libmpi.so.40")),
                                   layer(hardlink("usr/bin/mpirun", "opt/mpirun"),
                                         hardlink("usr/lib/libmpi.so.40", "opt/libmpi.so.40"), files(EVIDENCE[2]))],
                        tag="lower")
    doc = ok(tmp_path, lower)
    assert doc["requirements"][0]["met"] and doc["layers_read"] == 2, doc


def test_hardlink_to_a_file_a_layer_between_deleted_is_unreadable(tmp_path):
    ref = layout_with(tmp_path, [layer(files("opt/mpirun")), layer(entry(b"opt/.wh.mpirun", b"")),
                                 layer(hardlink("usr/bin/mpirun", "opt/mpirun"), files(*EVIDENCE[1:]))])
    message = refused(tmp_path, ref, why="hard link to /opt/mpirun")
    assert "layer 3 of 3" in message, message


# ---- truncated tar streams --------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 100, 511])
def test_layer_cut_in_the_middle_of_a_header_is_exit_2(tmp_path, cut):
    """Go's archive/tar says ErrUnexpectedEOF; the evidence before the cut proved Open MPI (exit 0)."""
    ref = layout_with(tmp_path, [layer(files(*EVIDENCE), tar_header(b"more", 0)[:cut], end=b"")])
    message = refused(tmp_path, ref, why="ends in the middle of a tar header")
    assert "layer 1 of 1" in message, message


def test_zero_block_then_a_header_is_exit_2(tmp_path):
    """One zero block then more entries: Go's archive/tar says ErrHeader; the entries after it were ignored."""
    ref = layout_with(tmp_path, [layer(files(*EVIDENCE), b"\0" * 512, files("more"), end=b"")])
    refused(tmp_path, ref, why="a zero block followed by a tar header")


def test_one_zero_block_at_the_end_is_read(tmp_path):
    """A stream ending after one zero block is what Go's archive/tar accepts too."""
    ref = layout_with(tmp_path, [layer(files(*EVIDENCE), end=b"\0" * 512)])
    assert ok(tmp_path, ref)["requirements"][0]["met"]


# ---- descriptors ------------------------------------------------------------------------------------------

def _manifest_with(tmp_path: Path, *, layer_size=None, config_size=None) -> str:
    layout = tmp_path / "layout"
    layout_with(tmp_path, [])
    blob = layer(files(*EVIDENCE))
    layer_digest, real = write_blob(layout, blob)
    config_digest, config_real = write_blob(layout, json.loads(CONFIG))
    layer_desc = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest,
                  "size": real if layer_size is None else layer_size}
    return point_tag(layout, "sized", {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": config_real if config_size is None else config_size},
        "layers": [layer_desc]})


@pytest.mark.parametrize("kwargs, what, why", [
    ({"layer_size": -1}, "layers[0]", "its size -1 is negative"),
    ({"config_size": -1}, "config", "its size -1 is negative"),
    ({"layer_size": 1 << 62}, "layers[0]", f"its size {1 << 62} is over the"),
    ({"layer_size": 10 ** 30}, "layers[0]", f"its size {10 ** 30} is over the"),
])
def test_descriptor_size_out_of_bounds_is_exit_2(tmp_path, kwargs, what, why):
    message = refused(tmp_path, _manifest_with(tmp_path, **kwargs), why=why)
    assert f"{what} is malformed" in message, message


def test_index_json_entry_with_a_negative_size_is_exit_2(tmp_path):
    ref = _manifest_with(tmp_path)
    index_path = tmp_path / "layout" / "index.json"
    index = json.loads(index_path.read_text())
    for m in index["manifests"]:
        m["size"] = -1
    index_path.write_text(json.dumps(index))
    refused(tmp_path, ref, why="its size -1 is negative")


# ---- the bearer realm -------------------------------------------------------------------------------------

USER, PASSWORD, TOKEN = "ci-bot", "s3cret-pa55", "tok-realm-0123"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


class TokenRegistry(ThreadingHTTPServer):
    """A loopback registry serving test_image_hostile's one image (no MPI in it) behind a bearer challenge whose
    realm is `realm` ({port} filled in); its /token answers the docker-config login, or anyone if `anonymous`."""
    daemon_threads = True

    def __init__(self, realm: str, anonymous: bool = False):
        super().__init__(("127.0.0.1", 0), _TokenHandler)
        self.port = self.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        self.realm, self.anonymous = realm.format(port=self.port), anonymous
        self.log: list[tuple[str, str, str | None]] = []     # (Host header, path, Authorization)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _TokenHandler(BaseHTTPRequestHandler):
    server: TokenRegistry

    def log_message(self, *args):
        pass

    def _send(self, status: int, data: bytes = b"", **headers: str) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(data)), **headers}.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        s, authz, path = self.server, self.headers.get("Authorization"), urllib.parse.urlsplit(self.path).path
        s.log.append((self.headers.get("Host", ""), self.path, authz))
        if path == "/token":
            if authz == BASIC or s.anonymous:
                return self._send(200, json.dumps({"token": TOKEN}).encode())
            return self._send(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}')
        if authz != f"Bearer {TOKEN}":
            return self._send(401, WWW_Authenticate=f'Bearer realm="{s.realm}",service="x"')
        body = {"/v2/hostile/manifests/latest": MANIFEST, f"/v2/hostile/blobs/{_digest(CONFIG)}": CONFIG,
                f"/v2/hostile/blobs/{_digest(LAYER)}": LAYER}.get(path)
        if body is None:
            return self._send(404)
        self._send(200, body, Content_Type="application/vnd.oci.image.manifest.v1+json")


@pytest.fixture
def token_registry():
    servers = []

    def make(realm: str, anonymous: bool = False) -> TokenRegistry:
        servers.append(TokenRegistry(realm, anonymous))
        return servers[-1]

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


def run_logged_in(tmp_path: Path, server: TokenRegistry, *args: str, **env: str) -> tuple[int, str, str]:
    """`infra image check` of the server's image, logged in to it in a docker config of its own."""
    config = tmp_path / "docker"
    config.mkdir(exist_ok=True)
    (config / "config.json").write_text(json.dumps(
        {"auths": {server.host: {"auth": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}}}))
    environ = {k: v for k, v in os.environ.items()
               if k not in ("REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "INFRA_REGISTRY_TOKEN_HOSTS")}
    environ.update(DOCKER_CONFIG=str(config), **env)
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", f"{server.host}/hostile:latest",
                           "--timeout", "20", *args], capture_output=True, text=True, cwd=ROOT, env=environ, timeout=90)
    assert "Traceback" not in proc.stderr, proc.stderr
    for secret in (PASSWORD, TOKEN, BASIC.split()[1]):
        assert secret not in proc.stdout + proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def test_realm_over_plain_http_to_a_remote_host_is_refused(tmp_path, token_registry):
    """The login would travel in clear text to whatever host the registry names (TEST-NET: never reached)."""
    server = token_registry("http://203.0.113.7/token")
    code, _, err = run_logged_in(tmp_path, server)
    assert code == 2 and "realm http://203.0.113.7/token" in err and "https" in err, err


def test_credentials_never_follow_a_realm_to_another_host(tmp_path, token_registry):
    """The realm names another host (localhost for 127.0.0.1): the docker-config login is not sent there; the
    token service then refuses the anonymous request, and the message says how to allow that host."""
    server = token_registry("http://localhost:{port}/token")
    code, _, err = run_logged_in(tmp_path, server)
    token_requests = [entry for entry in server.log if entry[1].startswith("/token")]
    assert token_requests and all(authz is None for _, _, authz in token_requests), server.log
    assert code == 2 and "INFRA_REGISTRY_TOKEN_HOSTS" in err and "localhost" in err, err


def test_anonymous_token_from_another_host_is_used(tmp_path, token_registry):
    """Docker Hub's way (auth.docker.io for registry-1.docker.io) for a public image: an anonymous token."""
    server = token_registry("http://localhost:{port}/token", anonymous=True)
    code, out, err = run_logged_in(tmp_path, server, "--json")
    assert code == 1 and json.loads(out)["layers_read"] == 1, (code, out, err)    # read; no MPI in it
    assert all(authz is None for _, path, authz in server.log if path.startswith("/token")), server.log


def test_a_token_host_the_user_allows_gets_the_login(tmp_path, token_registry):
    server = token_registry("http://localhost:{port}/token")
    code, out, err = run_logged_in(tmp_path, server, "--json", INFRA_REGISTRY_TOKEN_HOSTS="example.org, localhost")
    assert code == 1 and json.loads(out)["layers_read"] == 1, (code, out, err)
    assert any(authz == BASIC for _, path, authz in server.log if path.startswith("/token")), server.log


def test_docker_archive_cut_in_the_middle_of_a_header_is_exit_2(tmp_path):
    """`docker save` output whose own tar ends inside a header: `docker load` fails on it; it was read."""
    layer_tar = files(*EVIDENCE) + END
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [_digest(layer_tar)]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "Layers": ["l1/layer.tar"]}]).encode()
    out = io.BytesIO()
    tar = tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT)
    for name, data in ((config_name, config), ("l1/layer.tar", layer_tar), ("manifest.json", manifest)):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "image.tar"
    archive.write_bytes(out.getvalue() + tar_header(b"more", 0)[:100])     # members, then a cut header
    message = refused(tmp_path, f"docker-archive:{archive}", why="ends in the middle of its tar header")
    assert f"{archive}: tar entry 4" in message, message
