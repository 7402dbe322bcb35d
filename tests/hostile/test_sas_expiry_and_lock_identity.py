"""Two findings from reading the code (issue 22, item 9): the emulator's SAS links never expired (a log link
handed out once read the blob for ever), and the stack lock was taken over whenever its holder's host name was
this machine's and its pid was not running here, so two machines (or containers) of one name took each other's
lock. A SAS now carries a signed expiry (`se`, as Azure's) that the emulator checks; the lock records where its
pid means a process (machine-id, boot id, pid namespace) and is taken over only from there."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from infra_cli.azure.provider import AzureProvider
from infra_cli.state.lock import LockHeld, StackLock, lock_name
from infra_cli.azure.lock_store import register_lock_version
from infra_cli.emulator import auth
from infra_cli.emulator.blobs import blob_url


def _blob(emulator, data: bytes = b"secret log") -> str:
    emulator.backend.blobs.write("logs-abc", "user_logs/std_log.txt", data)
    return "user_logs/std_log.txt"


def _get(emulator, url: str) -> requests.Response:
    return requests.get(url, verify=str(emulator.cert_path), timeout=30)


def test_a_sas_link_carries_an_expiry_and_is_refused_once_it_passed(emulator):
    name = _blob(emulator)
    link = emulator.backend.blobs.sas_url(emulator.url, "logs-abc", name)
    assert "se" in parse_qs(urlsplit(link).query), "the link never expires"
    assert _get(emulator, link).content == b"secret log"
    expired = (blob_url(emulator.url, "logs-abc", name) + "?"
               + auth.sas_query(emulator.token, "logs-abc", name, expiry=time.time() - 60))
    r = _get(emulator, expired)
    assert r.status_code == 401 and r.headers["x-ms-error-code"] == "AuthenticationFailed"


def test_a_sas_without_its_expiry_or_with_a_later_one_is_refused(emulator):
    name = _blob(emulator)
    link = emulator.backend.blobs.sas_url(emulator.url, "logs-abc", name)
    base, query = link.split("?")
    params = dict(p.split("=", 1) for p in query.split("&"))
    without = "&".join(f"{k}={v}" for k, v in params.items() if k != "se")
    assert _get(emulator, f"{base}?{without}").status_code == 401
    later = {**params, "se": "2099-01-01T00%3A00%3A00Z"}
    assert _get(emulator, base + "?" + "&".join(f"{k}={v}" for k, v in later.items())).status_code == 401


MACHINE_TAG = "infra.lock.machine"
LINUX_IDENTITY = os.path.exists("/proc/sys/kernel/random/boot_id") and os.path.exists("/proc/self/ns/pid")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _held_by(clients, stack: str, **extra: str) -> None:
    register_lock_version(clients.versions, lock_name(stack), 1, {
        "infra.lock": "held", "infra.lock.holder": "someone@" + socket.gethostname(), "infra.lock.operation": "apply",
        "infra.lock.since": "2026-01-01T00:00:00Z", "infra.lock.host": socket.gethostname(),
        "infra.lock.pid": str(_dead_pid()), "infra.lock.token": "theirs", **extra})


@pytest.mark.skipif(not LINUX_IDENTITY, reason="no boot id or pid namespace to tell this machine by")
def test_a_lock_held_on_another_machine_of_the_same_name_is_not_taken_over(clients):
    _held_by(clients, "twin", **{MACHINE_TAG: "another-machine"})
    with pytest.raises(LockHeld):
        StackLock(AzureProvider(clients), "twin", "apply").acquire()
    _held_by(clients, "older-infra")      # a lock that does not say where its pid lives: not provably dead here
    with pytest.raises(LockHeld):
        StackLock(AzureProvider(clients), "older-infra", "apply").acquire()


@pytest.mark.skipif(not LINUX_IDENTITY, reason="no boot id or pid namespace to tell this machine by")
def test_a_lock_whose_holder_died_on_this_machine_is_taken_over(clients):
    from infra_cli.state.lock import machine_identity

    _held_by(clients, "killed", **{MACHINE_TAG: machine_identity()})
    lock = StackLock(AzureProvider(clients), "killed", "apply")
    lock.acquire()
    assert lock.version == 2
    lock.release()
