"""Attacks through the local state directory (issue 22, items 4 and 8): a directory another user owns or may
write, links planted inside it, a corrupt state database. Before: `plan --local` wrote the python shim through
a planted bin/python link (and made the target 0755), SQLite followed a linked state.sqlite3, a key.pem link
was truncated and written through, a blob PUT followed a linked container, and a corrupt database was
"internal error (a bug in infra)". The state is now trusted only as OpenSSH trusts ~/.ssh."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from infra_cli.diagnostics import DiagnosticError
from infra_cli.emulator.faults import FaultConfig
from infra_cli.emulator.server import EmulatorServer

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
STACK = """stack: trust
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  a100: {size: Standard_ND96amsr_A100_v4, max_instances: 2}
"""


def _start(state: Path) -> EmulatorServer:
    return EmulatorServer(state, faults=FaultConfig(provisioning_delay_s=0.1)).start()


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    os.chmod(victim, 0o600)
    return victim


def _planted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """(a file of ours, a state directory whose bin/python is a link to it)."""
    victim = _victim(tmp_path)
    state = tmp_path / name
    (state / "bin").mkdir(parents=True)
    os.symlink(victim, state / "bin" / "python")
    return victim, state


def _unchanged(victim: Path) -> None:
    assert victim.read_text() == "mine\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600


def _plan_local(tmp_path: Path, state: Path) -> subprocess.CompletedProcess:
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    env = {k: v for k, v in os.environ.items() if k not in ("INFRA_DEBUG", "INFRA_EMULATOR_URL")}
    env.update(PYTHONPATH=str(ROOT), INFRA_LOCAL_DIR=str(state))
    return subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(stack), "--local"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=env)


def test_a_state_directory_another_user_owns_is_refused(tmp_path):
    victim, state = _planted(tmp_path, "theirs")
    os.chown(state, NOBODY, NOBODY)
    with pytest.raises(DiagnosticError) as refused:
        _start(state).stop()
    message = str(refused.value)
    assert str(state) in message and "owned by" in message and "chown" in message
    _unchanged(victim)


def test_plan_local_over_a_world_writable_state_directory_is_refused(tmp_path):
    """The attack as reported: INFRA_LOCAL_DIR writable by anyone, bin/python a link to a file of ours."""
    victim, state = _planted(tmp_path, "shared")
    os.chmod(state, 0o777)
    r = _plan_local(tmp_path, state)
    assert r.returncode == 1, r.stdout + r.stderr
    assert str(state) in r.stderr and f"chmod go-w {state}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    _unchanged(victim)


def test_a_group_writable_subdirectory_is_refused(tmp_path):
    victim, state = _planted(tmp_path, "local")
    os.chmod(state, 0o700)
    os.chmod(state / "bin", 0o775)
    with pytest.raises(DiagnosticError, match="bin may be written by its group"):
        _start(state).stop()
    _unchanged(victim)


def test_a_directory_above_the_state_that_others_may_write_is_refused(tmp_path):
    above = tmp_path / "open"
    above.mkdir()
    os.chmod(above, 0o777)      # no sticky bit: anyone may rename the state directory away and plant their own
    with pytest.raises(DiagnosticError, match="above the state directory"):
        _start(above / "local").stop()
    os.chmod(above, 0o1777)     # as /tmp: others cannot rename what is ours
    _start(above / "local").stop()


def test_links_inside_a_private_state_directory_are_never_followed(tmp_path):
    victim, state = _planted(tmp_path, "local")
    key_victim = tmp_path / "key-victim.txt"
    key_victim.write_text("mine too\n")
    os.chmod(state, 0o700)
    os.symlink(key_victim, state / "key.pem")
    server = _start(state)
    try:
        for name in ("python", "python3"):   # the shim is a file of its own now, the link replaced
            assert (state / "bin" / name).is_file() and not (state / "bin" / name).is_symlink()
        assert not (state / "key.pem").is_symlink()
        assert stat.S_IMODE((state / "key.pem").stat().st_mode) == 0o600
    finally:
        server.stop()
    _unchanged(victim)
    assert key_victim.read_text() == "mine too\n"


def test_a_linked_state_database_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere.sqlite3"
    elsewhere.write_bytes(b"")
    state = tmp_path / "local"
    state.mkdir(mode=0o700)
    os.symlink(elsewhere, state / "state.sqlite3")
    with pytest.raises(DiagnosticError, match="state.sqlite3 is a symbolic link"):
        _start(state).stop()
    assert elsewhere.read_bytes() == b""


def test_a_linked_token_is_refused_with_a_message(tmp_path):
    from infra_cli.emulator.auth import TokenFileError, read_token

    state = tmp_path / "local"
    state.mkdir(mode=0o700)
    os.symlink(tmp_path / "nowhere", state / "token")
    with pytest.raises(TokenFileError, match="symbolic link"):
        read_token(state)


def test_a_blob_write_never_follows_a_link_in_the_blob_store(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    state = tmp_path / "local"
    server = _start(state)
    try:
        os.symlink(outside, state / "blobs" / "code-abc")
        r = requests.put(f"{server.url}devstoreaccount1/code-abc/f", data=b"evil",
                         headers={"x-ms-blob-type": "BlockBlob", "Authorization": f"Bearer {server.token}"},
                         verify=str(server.cert_path), timeout=30)
        assert r.status_code >= 400
    finally:
        server.stop()
    assert list(outside.iterdir()) == []


def test_a_link_at_a_blobs_own_path_is_never_written_through(tmp_path):
    """The blob's container folder is real; the blob's own file is a link (safe_files.open_beneath opens the final file
    with O_NOFOLLOW too, not only the folders on the way)."""
    victim = _victim(tmp_path)
    state = tmp_path / "local"
    server = _start(state)
    try:
        headers = {"x-ms-blob-type": "BlockBlob", "Authorization": f"Bearer {server.token}"}
        url = f"{server.url}devstoreaccount1/code-abc/"
        ok = requests.put(url + "first", data=b"fine", headers=headers, verify=str(server.cert_path), timeout=30)
        assert ok.status_code == 201, ok.text              # the container's folder exists, ours
        os.symlink(victim, state / "blobs" / "code-abc" / "f")
        r = requests.put(url + "f", data=b"evil", headers=headers, verify=str(server.cert_path), timeout=30)
        assert r.status_code == 409 and "InvalidBlobPath" in r.text, r.text
    finally:
        server.stop()
    _unchanged(victim)


@pytest.mark.parametrize("command", [["plan", "STACK", "--local"], ["emulator", "serve", "--dir", "STATE"],
                                     ["emulator", "reset", "--dir", "STATE"]])
def test_infra_local_dir_itself_a_link_is_refused_saying_so(tmp_path, command):
    """INFRA_LOCAL_DIR (or --dir) naming a link to a directory: refused with a message that says it is a link
    (not followed, not "not a directory"), and nothing is written where it points."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "local"
    link.symlink_to(real, target_is_directory=True)
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    env = {k: v for k, v in os.environ.items() if k not in ("INFRA_DEBUG", "INFRA_EMULATOR_URL")}
    env.update(PYTHONPATH=str(ROOT), INFRA_LOCAL_DIR=str(link))
    argv = [str(stack) if a == "STACK" else str(link) if a == "STATE" else a for a in command]
    r = subprocess.run([sys.executable, "-m", "infra_cli", *argv], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{link} is a symbolic link" in r.stderr and "INFRA_LOCAL_DIR" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert list(real.iterdir()) == []


def _corrupt(state: Path) -> Path:
    state.mkdir(mode=0o700)
    database = state / "state.sqlite3"
    database.write_bytes(b"this is no SQLite database\n" * 200)
    os.chmod(database, 0o600)
    return database


def test_a_corrupt_state_database_is_named_and_moved_aside_on_request(tmp_path):
    state = tmp_path / "local"
    database = _corrupt(state)
    r = _plan_local(tmp_path, state)
    assert r.returncode == 1, r.stdout + r.stderr
    assert str(database) in r.stderr and "infra emulator reset" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reset = subprocess.run([sys.executable, "-m", "infra_cli", "emulator", "reset", "--dir", str(state)],
                           capture_output=True, text=True, timeout=60, env=env)
    assert reset.returncode == 0, reset.stderr
    kept = [p for p in state.iterdir() if p.name.startswith("state.sqlite3.aside-")]
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"this is no SQLite")   # moved, not deleted
    _start(state).stop()      # an empty cloud now


def test_a_malformed_database_with_a_valid_header_is_named(tmp_path):
    import sqlite3

    state = tmp_path / "local"
    _start(state).stop()
    database = state / "state.sqlite3"
    db = sqlite3.connect(database)
    db.execute("CREATE TABLE filler (a)")
    db.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 200)
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    data = bytearray(database.read_bytes())
    data[4096:16384] = b"\xff" * (16384 - 4096)     # pages of the tables, the header left intact
    database.write_bytes(bytes(data))
    with pytest.raises(DiagnosticError, match="not a readable SQLite database"):
        _start(state).stop()
