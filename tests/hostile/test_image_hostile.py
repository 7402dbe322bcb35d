"""Hostile images and registries: `infra image check` must end under 200 MB of memory with exit 2 naming the bound
that stopped it (never a hang, a memory blow-up or a traceback, which exits 1 and CI reads as "not met").
The bounds are on work (bytes, entries, depth) and on the check's own deadline (--timeout), which the code
enforces and reports: no case asserts how long it took, so a loaded machine cannot fail one. Each case runs
with --timeout 120, so a bound that failed to fire shows as the deadline's message instead of the bound's.

Layers are tar bytes crafted here by hand (the hostile headers no tar writer would produce), stored in an OCI
layout written here too (umoci would choke on them); hostile registries are small loopback HTTP servers.
Each case runs the real CLI in a child process and measures that child's peak RSS (wait4).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from image_fixtures import point_tag, write_blob  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
RSS_MB = 200                        # the contract's memory bound for any hostile input, not a benchmark
DEADLINE_S = "120"                  # the check's own --timeout in each case, unless the case sets one
GIB = 1 << 30


# ---- running the CLI under the contract's bounds ----------------------------------------------------------

# The CLI is started by a small launcher, not by pytest: Linux carries a process's peak RSS across exec, so a
# child forked from a large pytest process would report pytest's size, not its own.
LAUNCHER = """
import json, os, subprocess, sys, time
report, kill_after, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
started = time.monotonic()
proc = subprocess.Popen(cmd)
while True:      # wait4: this child's own peak RSS, also when it had to be killed
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if not pid and time.monotonic() - started > kill_after:
        proc.kill()
        pid, status, usage = os.wait4(proc.pid, 0)
    if pid:
        break
    time.sleep(0.02)
proc.returncode = os.waitstatus_to_exitcode(status)
with open(report, "w") as fh:
    json.dump({"code": proc.returncode, "wall": time.monotonic() - started, "rss_mb": usage.ru_maxrss / 1024}, fh)
"""


def check(tmp_path: Path, *args: str, kill_after: float = 300.0) -> tuple[int, dict | str, float, float]:
    """Run `infra image check ARGS --json`; (exit code, its JSON (or raw output), wall seconds, peak RSS MB).
    A child still running after `kill_after` s, far past its own --timeout, is killed (exit -9): a hang fails the
    test instead of the run."""
    if "--timeout" not in args:
        args = (*args, "--timeout", DEADLINE_S)
    env = {k: v for k, v in os.environ.items() if k not in ("REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR")}
    env["DOCKER_CONFIG"] = str(tmp_path / "no-docker-config")    # no host credentials, no helpers
    out, err, report = tmp_path / "stdout", tmp_path / "stderr", tmp_path / "report.json"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        subprocess.run([sys.executable, "-c", LAUNCHER, str(report), str(kill_after), sys.executable, "-m",
                        "infra_cli", "image", "check", *args, "--json"], stdout=fo, stderr=fe, cwd=ROOT, env=env,
                       check=True, timeout=kill_after + 30)
    measured = json.loads(report.read_text())
    text, errors = out.read_text(), err.read_text()
    assert "Traceback" not in errors, errors[-3000:]
    try:
        doc: dict | str = json.loads(text)
    except ValueError:
        doc = text + errors
    return measured["code"], doc, measured["wall"], measured["rss_mb"]


def refused(tmp_path: Path, *args: str, why: str) -> str:
    """Assert the contract for a hostile input: exit 2 under RSS_MB, one error containing `why` (the bound)."""
    code, doc, wall, rss = check(tmp_path, *args)
    assert code == 2, (code, doc, wall, rss)
    assert isinstance(doc, dict) and len(doc["errors"]) == 1, doc
    message = doc["errors"][0]["message"]
    assert why in message, message
    assert rss < RSS_MB, f"peak RSS {rss:.0f} MB: {message}"
    return message


# ---- layers crafted by hand -------------------------------------------------------------------------------

def tar_header(name: bytes, size: int, flag: bytes = b"0") -> bytes:
    """A ustar header block with a correct checksum; `size` as declared, whatever follows it."""
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108], h[108:116], h[116:124] = b"0000644\0", b"0000000\0", b"0000000\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"%011o\0" % 1700000000
    h[148:156] = b" " * 8
    h[156:157] = flag
    h[257:265] = b"ustar\x0000"
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def entry(name: bytes, data: bytes, flag: bytes = b"0") -> bytes:
    return tar_header(name, len(data), flag) + data + b"\0" * (-len(data) % 512)


END = b"\0" * 1024


def pax_layer(records: bytes) -> bytes:
    """A layer whose one file is preceded by a PAX extended header holding `records` as written."""
    return gzip.compress(entry(b"PaxHeaders/f", records, b"x") + entry(b"f", b"hello\n") + END)


@pytest.fixture(scope="module")
def gib_of_zeros() -> bytes:
    """1 GiB of zero bytes as one gzip member (about 1 MB): the body of a header that declares 1 GiB."""
    try:
        from isal import isal_zlib as zlib
    except ImportError:     # pragma: no cover (isal is a dependency)
        import zlib
    comp, block, parts = zlib.compressobj(1, zlib.DEFLATED, 31), bytes(16 << 20), []
    for _ in range(GIB // len(block)):
        parts.append(comp.compress(block))
    parts.append(comp.flush())
    return b"".join(parts)


def layout_with(tmp_path: Path, layers: list[bytes], tag: str = "hostile") -> str:
    """An OCI layout holding one linux/amd64 image of `layers` (gzip blobs as given); `oci:DIR:TAG`."""
    layout = tmp_path / "layout"
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    if not (layout / "index.json").exists():
        (layout / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    descs = []
    for blob in layers:
        digest, size = write_blob(layout, blob)
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": size})
    config = {"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"]},
              "rootfs": {"type": "layers", "diff_ids": []}}
    digest, size = write_blob(layout, config)
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest, "size": size},
                "layers": descs}
    return point_tag(layout, tag, manifest)


# ---- PAX records and GNU long names -----------------------------------------------------------------------

@pytest.mark.parametrize("records, why", [
    (b"0 path=x\n", "PAX record of length 0"),                 # looped forever: the cursor never moved
    (b"-9 path=x\n", "PAX record of length -9"),               # looped forever: the cursor moved back
    (b"30 path=x\n", "PAX record of length 30 runs past"),   # longer than the header holds
    (b"9 path=x", "PAX record of length 9"),                   # shorter than it says: no newline where it ends
    (b"12 pathx=\nxx", "does not end in a newline"),
    (b"8 nokey\n", "has no key=value"),
    (b"path=x\n", "PAX record does not start with its length"),
    (b"13 size=-512\n", "PAX size -512"),                      # a negative size moved the cursor back: a loop
    (b"12 size=1e9\n", "PAX size 1e9"),
])
def test_malformed_pax_records_are_exit_2(tmp_path, records, why):
    message = refused(tmp_path, layout_with(tmp_path, [pax_layer(records)]), why=why)
    assert "layer 1 of 1 (sha256:" in message and "tar entry 1" in message, message


@pytest.mark.parametrize("flag, what", [
    (b"L", "GNU long name"), (b"K", "GNU long link name"), (b"x", "PAX extended header"),
    (b"g", "PAX global header"),
])
def test_special_entry_declaring_a_gib_is_exit_2_without_buffering_it(tmp_path, gib_of_zeros, flag, what):
    """972 KB of gzip that inflate to a header declaring 1 GiB: it was buffered (rebuilt per chunk), 2.9 GB RSS."""
    layer = gzip.compress(tar_header(b"././@LongLink", GIB, flag)) + gib_of_zeros
    message = refused(tmp_path, layout_with(tmp_path, [layer]), why=f"{what} of {GIB} bytes")
    assert "over the 1 MiB" in message and "layer 1 of 1" in message, message


def test_path_longer_than_path_max_is_exit_2(tmp_path):
    name = b"a/" * 3000 + b"f"
    layer = gzip.compress(entry(b"././@LongLink", name + b"\0", b"L") + entry(b"f", b"x") + END)
    refused(tmp_path, layout_with(tmp_path, [layer]), why="path of 6001 bytes")


def test_deep_paths_cannot_multiply_memory(tmp_path):
    """3,000 entries whose paths are 2,000 directories deep, each under its own top directory: every one
    implies 2,000 directories (6 million in all) from a layer of a few hundred KB."""
    deep = b"a/" * 2000 + b"f"
    layer = gzip.compress(b"".join(entry(b"././@LongLink", b"b%d/" % i + deep + b"\0", b"L") + entry(b"f", b"")
                                   for i in range(3000)) + END)
    refused(tmp_path, layout_with(tmp_path, [layer]), why="directories their paths imply exceed the bound")


def test_layer_that_inflates_for_ever_stops_at_the_timeout(tmp_path, gib_of_zeros):
    """Five files of 7 GiB of zeros (35 MB of gzip) are read at inflate speed; --timeout bounds that too."""
    one = gzip.compress(tar_header(b"big", 7 * GIB)) + gib_of_zeros * 7
    message = refused(tmp_path, layout_with(tmp_path, [one * 5]), "--timeout", "2", why="--timeout of 2 s")
    assert "layer 1 of 1" in message, message


# ---- JSON documents ---------------------------------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000


def test_deeply_nested_index_json_is_exit_2(tmp_path):
    ref = layout_with(tmp_path, [pax_layer(b"10 path=x\n")])
    (tmp_path / "layout" / "index.json").write_bytes(DEEP)
    refused(tmp_path, ref, why="index.json is malformed: nested deeper than")


def test_deeply_nested_manifest_is_exit_2(tmp_path):
    layout_with(tmp_path, [])
    ref = point_tag(tmp_path / "layout", "deep", DEEP)
    refused(tmp_path, ref, why="is malformed: nested deeper than")


def test_deeply_nested_config_is_exit_2(tmp_path):
    layout = tmp_path / "layout"
    layout_with(tmp_path, [])
    digest, size = write_blob(layout, b'{"config": ' + DEEP + b"}")
    ref = point_tag(layout, "deep", {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                                     "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                                "digest": digest, "size": size}, "layers": []})
    refused(tmp_path, ref, why=f"config {digest} is malformed: nested deeper than")


@pytest.mark.parametrize("head, why", [
    (tar_header(b"PaxHeaders/f", GIB, b"x"), "a PAX extended header of 1073741824 bytes is over the 1 MiB"),
    (entry(b"PaxHeaders/f", b"0 path=x\n", b"x"), "PAX record of length 0"),
    (entry(b"PaxHeaders/f", b"13 size=-512\n", b"x"), "PAX size -512"),
])
def test_hostile_docker_archive_headers_are_exit_2(tmp_path, head, why):
    """The archive's own tar headers get the layer walker's bounds: a sparse file of 1 GiB declaring a 1 GiB
    PAX header was read whole by tarfile (over a minute, 1 GB of memory)."""
    archive = tmp_path / "image.tar"
    with open(archive, "wb") as fh:
        fh.write(head + entry(b"manifest.json", b"[]") + END)
        fh.truncate(max(fh.tell(), 512 + GIB + 4096))    # sparse: costs no disk
    message = refused(tmp_path, f"docker-archive:{archive}", why=why)
    assert f"{archive}: tar entry 1" in message, message


def test_fifo_as_docker_archive_is_refused(tmp_path):
    fifo = tmp_path / "image.tar"
    os.mkfifo(fifo)
    refused(tmp_path, f"docker-archive:{fifo}", why="not a regular file")


# ---- hostile registries -----------------------------------------------------------------------------------

CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"]}}).encode()
LAYER = gzip.compress(entry(b"f", b"hello\n") + END)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


MANIFEST = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(CONFIG), "size": len(CONFIG)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _digest(LAYER),
                "size": len(LAYER)}]}).encode()


class Hostile(ThreadingHTTPServer):
    """A registry on 127.0.0.1 serving one image (`hostile:latest`) honestly except where `mode` says."""
    daemon_threads = True

    def __init__(self, mode: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.host = f"127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _Handler(BaseHTTPRequestHandler):
    server: Hostile

    def log_message(self, *args):
        pass

    def _head(self, status: int = 200, length: int | None = None, **headers: str) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send(self, data: bytes, **headers: str) -> None:
        self._head(200, len(data), **headers)
        self.wfile.write(data)

    def _trickle(self, data: bytes, **headers: str) -> None:
        self._head(200, len(data), **headers)
        for i in range(len(data)):
            self.wfile.write(data[i:i + 1])
            time.sleep(1)

    def _endless(self, declared: int | None) -> None:
        self._head(200, declared)
        chunk = os.urandom(1 << 16)
        while True:
            self.wfile.write(chunk)

    def do_GET(self):
        mode, path = self.server.mode, self.path.split("?")[0]
        try:
            if mode == "silent":
                time.sleep(60)          # accepts, reads the request, never answers
                return
            if path == "/v2/":
                return self._send(b"{}")
            if path == "/token":
                return self._trickle(b'{"token": "t"}')
            if mode == "token" and self.headers.get("Authorization") != "Bearer t":
                realm = f"http://{self.server.host}/token"
                return self._head(401, 0, WWW_Authenticate=f'Bearer realm="{realm}",service="x"')
            if path.endswith("/manifests/latest"):
                if mode == "trickle-manifest":
                    return self._trickle(MANIFEST, Content_Type="application/vnd.oci.image.manifest.v1+json")
                if mode == "endless-manifest":
                    return self._endless(None)
                return self._send(MANIFEST, Content_Type="application/vnd.oci.image.manifest.v1+json")
            if path.endswith("/blobs/" + _digest(CONFIG)):
                return self._send(CONFIG)
            if path.endswith("/blobs/" + _digest(LAYER)):
                if mode == "redirect":
                    return self._head(307, 0, Location=f"http://{self.server.host}/storage/layer")
                if mode == "endless-blob":
                    return self._endless(None)
                if mode == "endless-blob-declared":
                    return self._endless(10 * GIB)
                return self._send(LAYER)
            if path == "/storage/layer":
                return self._trickle(LAYER)
            self._head(404, 0)
        except (BrokenPipeError, ConnectionResetError):
            pass                        # the checker hung up: what a bounded client does


@pytest.fixture
def hostile():
    servers = []

    def make(mode: str) -> Hostile:
        servers.append(Hostile(mode))
        return servers[-1]

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.mark.parametrize("mode", ["endless-blob", "endless-blob-declared"])
def test_endless_blob_is_cut_at_its_declared_size(tmp_path, hostile, mode):
    server = hostile(mode)
    message = refused(tmp_path, f"{server.host}/hostile:latest", why=f"more than the {len(LAYER)} bytes")
    assert _digest(LAYER) in message, message


def test_endless_manifest_is_cut_at_the_manifest_bound(tmp_path, hostile):
    server = hostile("endless-manifest")
    refused(tmp_path, f"{server.host}/hostile:latest", why="over the 4 MiB bound")


@pytest.mark.parametrize("mode, what", [
    ("silent", "registry 127.0.0.1"),                     # never answers
    ("trickle-manifest", "manifests/latest"),             # one byte a second
    ("token", "/token"),                                  # the token service trickles
    ("redirect", "/storage/layer"),                       # the redirected blob trickles
])
def test_timeout_bounds_the_whole_check(tmp_path, hostile, mode, what):
    server = hostile(mode)
    message = refused(tmp_path, f"{server.host}/hostile:latest", "--timeout", "3", why="--timeout of 3 s")
    assert what in message, message
    # a trickle of one byte a second never ends by itself: the exit 2 naming the 3 s deadline (not the kill after
    # 300 s, exit -9) proves the deadline is for the whole check, not per read


def test_default_timeout_is_stated_in_help():
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", "--help"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)
    assert "--timeout" in proc.stdout and "300" in proc.stdout, proc.stdout


def test_loopback_socket_never_accepting_is_bounded(tmp_path):
    """A listener whose backlog is full: connect() itself stalls; the deadline covers it too."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        host = "127.0.0.1:%d" % listener.getsockname()[1]
        fillers = []
        for _ in range(8):      # fill the backlog so that further connects hang in SYN_SENT
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(listener.getsockname())
            fillers.append(s)
        try:
            refused(tmp_path, f"{host}/hostile:latest", "--timeout", "3", why="--timeout of 3 s")
        finally:
            for s in fillers:
                s.close()


# ---- references that break the grammar (issue 22, item 7) ------------------------------------------------

@pytest.mark.parametrize("reference", [
    "./good", "../good", "/abs/good", "~/good", "a.b:99999/x", "a.b:0/x", "a" * 70 + ".io/x", "host..io/x",
    "a.-b.io/x", "[::1/x", "[::1]x/y", "Upper/Repo", "x@sha256:zz", "x:" + "t" * 129, "x::", "ubuntu:22.04\nRUN x",
    "ubuntu\x1b:1", "\u0130.io/x",
])
def test_bad_reference_is_exit_2_naming_the_grammar(tmp_path, reference):
    """Not 'internal error (a bug in infra)' with exit 1 (a host of '.' failed in the idna codec): exit 2, and
    the message names the reference grammar or what in the reference breaks it."""
    message = refused(tmp_path, reference, why="not an image reference")
    assert "internal error" not in message


def test_a_path_is_told_which_prefix_reads_it(tmp_path):
    code, doc, _, _ = check(tmp_path, "./good")
    assert code == 2
    [error] = doc["errors"]
    assert "distribution/reference" in error["message"] and "oci:./good" in error["hint"], error
