"""Every command that writes under the stack's lock meets a lock another run holds as apply does: exit 1, who holds
it since when, the force-unlock to run, and nothing changed. Before, `infra state rm` (and `infra import`, once
it took the lock) printed "internal error (a bug in infra): LockHeld" and asked for a bug report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML

from infra_cli.azure.provider import AzureProvider
from infra_cli.state.lock import StackLock

ROOT = Path(__file__).resolve().parents[2]
STACK = f"stack: held\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}\n"


def _cli(*args: str, emulator, state: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD",)}
    env.update(INFRA_EMULATOR_URL=emulator.url, INFRA_LOCAL_DIR=str(state))
    return subprocess.run([sys.executable, "-m", "infra_cli", *args, "--local"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def _refused_as_locked(r: subprocess.CompletedProcess, stack: Path) -> None:
    assert r.returncode == 1, r.stdout + r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "error: stack 'held' is locked by " in r.stderr and "(apply); nothing was changed." in r.stderr, r.stderr
    assert "(lock ID " in r.stderr and "run `infra force-unlock " in r.stderr, r.stderr   # the ID: its own test
    assert f" {stack} --local`" in r.stderr, r.stderr


def test_state_rm_and_import_beside_a_running_apply_say_the_stack_is_locked(tmp_path, clients, emulator):
    state, stack = tmp_path / "local", tmp_path / "stack.yaml"
    stack.write_text(STACK)
    assert _cli("apply", str(stack), "--auto-approve", "--no-smoke", emulator=emulator, state=state).returncode == 0
    with StackLock(AzureProvider(clients), "held", "apply"):   # another apply holds the stack
        _refused_as_locked(_cli("state", "rm", "cluster.gpu", str(stack), emulator=emulator, state=state), stack)
    assert (clients.ml.compute.get("gpu").tags or {}).get("infra.stack") == "held", "still owned: nothing changed"

    assert _cli("state", "rm", "cluster.gpu", str(stack), emulator=emulator, state=state).returncode == 0
    with StackLock(AzureProvider(clients), "held", "apply"):
        _refused_as_locked(_cli("import", "cluster.gpu", "gpu", str(stack), emulator=emulator, state=state), stack)
    assert not (clients.ml.compute.get("gpu").tags or {}).get("infra.stack"), "not adopted beside the apply"
    adopted = _cli("import", "cluster.gpu", "gpu", str(stack), emulator=emulator, state=state)
    assert adopted.returncode == 0 and "Imported gpu as cluster.gpu." in adopted.stdout, adopted.stderr
