"""`infra force-unlock LOCK_ID STACK` as Terraform's (issue 40). Before, `infra force-unlock STACK` cleared the lock
of an apply still running on this machine at once, and a second apply then wrote the stack beside it; no message
showed a lock ID. Now every "locked" message shows the lock's ID, force-unlock clears only the lock it names,
and refuses one whose holder (host, pid and machine identity, recorded in the lock) still runs here unless
--force (Terraform's -force) is given. Real processes: an `infra apply` holds the lock while its cluster is
being created (a long provisioning delay), and `infra force-unlock` runs beside it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from emulator_fixtures import WORKSPACE_YAML, running_apply, start_emulator

from infra_cli.state.lock import LockChanged, StackLock, force_unlock, read_lock

ROOT = Path(__file__).resolve().parents[2]
STACK = f"stack: held\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}\n"


@pytest.fixture
def slow_emulator(tmp_path):
    """An emulator whose clusters take long to create: an apply holds the stack's lock while it waits."""
    server = start_emulator(tmp_path / "local", provisioning_delay_s=120)
    yield server
    server.stop()


@pytest.fixture
def versions(slow_emulator, test_workspace):
    from infra_cli.azure.provider import AzureProvider
    from infra_cli.commands.backend import build_clients

    return AzureProvider(build_clients(test_workspace, local=True, emulator=slow_emulator))


def _env(emulator) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD",)}
    env.update(INFRA_EMULATOR_URL=emulator.url, INFRA_LOCAL_DIR=str(emulator.state_dir))
    return env


def _infra(*args: str, emulator) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args, "--local"], capture_output=True, text=True,
                       env=_env(emulator), cwd=ROOT, timeout=300)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return r


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=60)


def test_force_unlock_refuses_a_live_apply_s_lock_unless_forced(tmp_path, slow_emulator, versions):
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    apply = running_apply(stack, _env(slow_emulator))
    try:
        held = read_lock(versions, "held")
        assert held.held and held.pid == apply.pid and held.lock_id
        lock_id = held.lock_id

        # the "locked" message shows the ID, and the force-unlock to run names it
        more = tmp_path / "more.yaml"     # the same stack with one more cluster: its apply needs the lock
        more.write_text(STACK + "  gpu2: {size: Standard_NC24ads_A100_v4, max_instances: 1}\n")
        second = _infra("apply", str(more), "--auto-approve", "--no-smoke", emulator=slow_emulator)
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"(lock ID {lock_id})" in second.stderr, second.stderr
        assert f"run `infra force-unlock {lock_id} {more} --local`" in second.stderr, second.stderr

        # without an ID (the command as it was): refused, saying the ID
        r = _infra("force-unlock", str(stack), emulator=slow_emulator)
        assert r.returncode == 1 and "error[lock.id-required]" in r.stderr and lock_id in r.stderr, r.stderr
        # another ID: refused
        r = _infra("force-unlock", "0" * 8 + lock_id[8:], str(stack), emulator=slow_emulator)
        assert r.returncode == 1 and "error[lock.id-mismatch]" in r.stderr and lock_id in r.stderr, r.stderr
        # the right ID, but its holder runs on this machine: refused, naming it and the way out
        r = _infra("force-unlock", lock_id, str(stack), emulator=slow_emulator)
        assert r.returncode == 1 and "error[lock.holder-alive]" in r.stderr, r.stderr
        assert f"pid {apply.pid} on this machine" in r.stderr and "--force" in r.stderr, r.stderr
        assert "nothing was cleared" in r.stderr
        now = read_lock(versions, "held")
        assert now.held and now.token == held.token and now.version == held.version, "the lock is still the apply's"

        # -force (Terraform's spelling) clears it
        r = _infra("force-unlock", lock_id, str(stack), "-force", emulator=slow_emulator)
        assert r.returncode == 0 and f"Cleared the lock held by {held.holder}" in r.stdout, r.stdout + r.stderr
        assert not read_lock(versions, "held").held
    finally:
        _stop(apply)


def test_a_killed_apply_s_lock_is_cleared_by_its_id_without_force(tmp_path, slow_emulator, versions):
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    apply = running_apply(stack, _env(slow_emulator))
    apply.send_signal(signal.SIGKILL)
    apply.communicate(timeout=60)
    held = read_lock(versions, "held")
    assert held.held and held.pid == apply.pid
    r = _infra("force-unlock", held.lock_id.upper().replace("-", ""), str(stack), emulator=slow_emulator)
    assert r.returncode == 0 and f"(lock ID {held.lock_id})" in r.stdout, r.stdout + r.stderr
    assert not read_lock(versions, "held").held
    r = _infra("force-unlock", held.lock_id, str(stack), emulator=slow_emulator)
    assert r.returncode == 0 and "The stack was not locked." in r.stdout, r.stdout + r.stderr
    # the stack order of the arguments reads as meant; an ID without a stack is named as such
    r = _infra("force-unlock", str(stack), held.lock_id, emulator=slow_emulator)
    assert r.returncode == 0 and "The stack was not locked." in r.stdout, r.stdout + r.stderr
    r = _infra("force-unlock", held.lock_id, emulator=slow_emulator)
    assert r.returncode == 1 and "error[lock.stack-required]" in r.stderr, r.stderr


def test_force_unlock_never_clears_a_lock_taken_since_it_was_read(versions):
    """The lock read, then released and taken again by another run before the clear lands: the clear registers
    the version after the one it read, which exists, so the new holder's lock stands."""
    first = StackLock(versions, "held", "apply")
    first.acquire()
    seen = read_lock(versions, "held")
    first.release()
    with StackLock(versions, "held", "apply"):
        taken = read_lock(versions, "held")
        with pytest.raises(LockChanged) as raised:
            force_unlock(versions, "held", seen)
        assert raised.value.now.held and raised.value.now.token == taken.token
        assert read_lock(versions, "held").token == taken.token
