"""Attacks on the local emulator from another local process: it must not write files outside its state
directory nor run anyone's commands. Each of these passed (the attack worked) before the emulator required
its token (infra_cli/emulator/auth.py) and held container names to Azure's rules."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from emulator_fixtures import TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, start_emulator  # noqa: E402

ACCOUNT = "devstoreaccount1"
W = (f"subscriptions/{TEST_SUBSCRIPTION}/resourceGroups/{TEST_RESOURCE_GROUP}/providers/"
     f"Microsoft.MachineLearningServices/workspaces/{TEST_WORKSPACE}")


def _put(emulator, path: str, data: bytes = b"x", headers: dict | None = None) -> requests.Response:
    return requests.put(emulator.url + path, data=data, headers={"x-ms-blob-type": "BlockBlob", **(headers or {})},
                        verify=str(emulator.cert_path), timeout=30)


def _bearer(emulator) -> dict:
    return {"Authorization": f"Bearer {emulator.token}"}


@pytest.fixture
def workspace(emulator):
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, "eastus")
    return emulator


@pytest.mark.parametrize("container", ["%2F{out}", "..%2F..%2F{out_rel}", "..", "UPPER", "a", "x" * 64,
                                       "double--hyphen", "%00nul"])
def test_blob_container_names_cannot_leave_the_state_directory(emulator, tmp_path, container):
    """A container name that is an absolute path to a folder of this test's own, or a relative one climbing to it:
    nothing lands there (the test looks only at its own folders, so other processes' files in /tmp do not count)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    name = container.format(out=str(outside).lstrip("/").replace("/", "%2F"),
                            out_rel=os.path.relpath(outside, emulator.state_dir / "blobs").replace("/", "%2F"))
    # without a credential: refused before anything touches the disk
    r = _put(emulator, f"{ACCOUNT}/{name}/F")
    assert r.status_code == 401
    # even with the token: the name is not a container name Azure accepts (a bare ".." is resolved by the
    # client before it is sent, and names no route)
    r = _put(emulator, f"{ACCOUNT}/{name}/F", headers=_bearer(emulator))
    assert (r.status_code, r.headers["x-ms-error-code"]) in ((400, "InvalidResourceName"),
                                                             (404, "NoRegisteredProviderFound")), r.text
    assert list(outside.iterdir()) == []
    blobs = emulator.state_dir / "blobs"
    assert [p for p in tmp_path.rglob("F") if not p.is_relative_to(blobs)] == []   # nowhere else under the test's folder


def test_blob_names_cannot_escape_their_container(emulator, tmp_path):
    for name in ("..%2F..%2Fescape", "a%2F..%2F..%2F..%2Fescape", "a%5C..%5Cescape", "a%00b"):
        r = _put(emulator, f"{ACCOUNT}/code-1/{name}", headers=_bearer(emulator))
        assert r.status_code == 400, (name, r.status_code)
    assert not (emulator.state_dir / "escape").exists() and not (emulator.state_dir.parent / "escape").exists()


def test_every_endpoint_refuses_any_other_bearer_token(workspace, tmp_path):
    verify = str(workspace.cert_path)
    wrong = {"Authorization": "Bearer anything"}
    pwned = tmp_path / "pwned-by-emulator-test"     # this test's own: a busy shared /tmp cannot fail it
    job = {"properties": {"jobType": "Command", "command": f"touch {pwned}",
                          "computeId": "x", "environmentId": "y"}}
    attempts = [
        ("GET", f"subscriptions/{TEST_SUBSCRIPTION}/providers/Microsoft.Compute/skus?api-version=2021-07-01", None),
        ("PUT", f"{W}/jobs/evil?api-version=2025-01-01-preview", job),
        ("GET", f"{W}/computes?api-version=2023-08-01-preview", None),
        ("GET", f"history/v1.0/{W}/runs/evil", None),
        ("GET", "subscriptions/x/not-a-route?api-version=1", None),   # no 404 to a stranger either
    ]
    for method, path, body in attempts:
        for headers in ({}, wrong, {"Authorization": "Basic Zm9vOmJhcg=="}):
            r = requests.request(method, workspace.url + path, json=body, headers=headers, verify=verify, timeout=30)
            assert r.status_code == 401, (method, path, headers, r.status_code)
            assert r.json()["error"]["code"] in ("AuthenticationFailed", "InvalidAuthenticationToken")
            assert r.headers["WWW-Authenticate"].startswith("Bearer ")
    assert not pwned.exists()
    assert workspace.stats.by_status().get(201, 0) == 0


def test_blobs_take_only_a_sas_the_emulator_issued(workspace):
    from infra_cli.emulator import auth

    verify = str(workspace.cert_path)
    blobs = workspace.backend.blobs
    upload = blobs.sas_url(workspace.url, "code-abc", permissions=auth.UPLOAD)
    assert _put(workspace, upload.replace(workspace.url, "").replace("code-abc?", "code-abc/f?"), b"ok").status_code == 201
    # the same SAS names another container: refused
    other = upload.replace("code-abc", "code-xyz").replace(workspace.url, "").replace("code-xyz?", "code-xyz/f?")
    assert _put(workspace, other).status_code == 401
    # a forged signature, and the old constant one
    forged = upload.split("sig=")[0] + "sig=emulated"
    assert _put(workspace, forged.replace(workspace.url, "").replace("code-abc?", "code-abc/f?")).status_code == 401
    # a read-only link to one blob reads it, and neither writes it nor reads its neighbour
    link = blobs.sas_url(workspace.url, "code-abc", "f")
    assert requests.get(link, verify=verify, timeout=30).content == b"ok"
    assert requests.put(link, data=b"evil", headers={"x-ms-blob-type": "BlockBlob"}, verify=verify,
                        timeout=30).status_code == 401
    assert requests.get(link.replace("/f?", "/g?"), verify=verify, timeout=30).status_code == 401
    # raising the permissions in the query breaks the signature
    assert requests.put(link.replace("sp=r", "sp=rw"), data=b"evil", headers={"x-ms-blob-type": "BlockBlob"},
                        verify=verify, timeout=30).status_code == 401
    assert requests.get(link, verify=verify, timeout=30).content == b"ok"


def test_discovery_link_is_signed(workspace):
    verify = str(workspace.cert_path)
    body = requests.get(f"{workspace.url}{W}?api-version=2024-10-01-preview", headers=_bearer(workspace),
                        verify=verify, timeout=30).json()
    link = body["properties"]["discoveryUrl"]
    assert requests.get(link, verify=verify, timeout=30).json()["api"]
    assert requests.get(link.split("?")[0], verify=verify, timeout=30).status_code == 401


def test_a_refused_request_is_not_buffered(emulator):
    """A stranger's large body is never read: the answer comes before the upload would finish."""
    import socket
    import ssl

    context = ssl.create_default_context(cafile=str(emulator.cert_path))
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(f"PUT /{ACCOUNT}/code-1/big HTTP/1.1\r\nHost: x\r\nContent-Length: {1 << 34}\r\n\r\n".encode())
            answer = tls.recv(4096).decode(errors="replace")
    assert answer.startswith("HTTP/1.1 401")


def test_token_file_is_private_random_and_kept_across_restarts(tmp_path):
    state = tmp_path / "local"
    first = start_emulator(state)
    try:
        token = first.token
        info = (state / "token").stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and len(token) >= 32
    finally:
        first.stop()
    second = start_emulator(state)
    try:
        assert second.token == token   # a running `serve` and `--local` commands share one token
    finally:
        second.stop()
    other = start_emulator(tmp_path / "other")
    try:
        assert other.token != token
    finally:
        other.stop()


def test_a_token_file_others_can_read_is_refused(tmp_path):
    from infra_cli.emulator.auth import TokenFileError, read_token

    state = tmp_path / "local"
    state.mkdir()
    (state / "token").write_text("a-token-someone-else-may-have-read-0123456789\n")
    os.chmod(state / "token", 0o644)
    with pytest.raises(TokenFileError, match="0600"):
        read_token(state)
    r = subprocess.run([sys.executable, "-m", "infra_cli", "emulator", "serve", "--dir", str(state)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "0600" in r.stderr and "Traceback" not in r.stderr
    os.symlink(tmp_path / "elsewhere", state / "link")
    (state / "token").unlink()
    os.symlink(tmp_path / "elsewhere", state / "token")
    with pytest.raises(OSError):
        read_token(state)


def test_sdk_clients_work_with_the_token(clients):
    """The real SDKs, given the token through LocalCredential, are let in (the other side of the lock)."""
    assert clients.ml.compute.list() is not None
    assert list(clients.compute.resource_skus.list(filter="location eq 'eastus'"))


def _race_token(args) -> str:
    from infra_cli.emulator.auth import ensure_token

    state, start = args
    while time.time() < start:
        pass
    return ensure_token(Path(state))


def test_two_processes_starting_at_once_agree_on_one_token(tmp_path):
    """Emulators started together over a new state directory (two `--local` commands) must not each keep a
    token of their own: the one that lost would refuse the other's clients."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=2) as pool:
        for trial in range(10):
            state = tmp_path / f"s{trial}"
            state.mkdir()
            start = time.time() + 0.3
            tokens = list(pool.map(_race_token, [(str(state), start)] * 2))
            assert tokens[0] == tokens[1] == (state / "token").read_text().strip()
            assert [p.name for p in state.iterdir()] == ["token"]   # no temporary file left behind
