"""After a destroy, the stack's lock is retired whole (issue 40, a surviving mutation): the "free" version its
release registered is archived with every version before it, so no active version of `infra-lock-STACK` is left
in the workspace (carrying the stack's tag or not), and the next apply takes the lock past the archived ones.
Before, the only check was that the lock had some archived version: archiving up to the version before the
release (the "free" version left active) passed it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML

from infra_cli.azure.environment_versions import ARCHIVED_ONLY
from infra_cli.azure.provider import AzureProvider
from infra_cli.state.lock import lock_name, read_lock

ROOT = Path(__file__).resolve().parents[2]
STACK = f"stack: retired\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}\n"


def _infra(*args: str, emulator, state: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD",)}
    env.update(INFRA_EMULATOR_URL=emulator.url, INFRA_LOCAL_DIR=str(state))
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args, "--local"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=300)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return r


def _numbers(listed: list[dict]) -> list[int]:
    return sorted(int(v["name"]) for v in listed)


def test_destroy_archives_the_lock_s_free_version_too(tmp_path, emulator, clients):
    state, stack = tmp_path / "local", tmp_path / "stack.yaml"
    stack.write_text(STACK)
    name = lock_name("retired")
    assert _infra("apply", str(stack), "--auto-approve", "--no-smoke", emulator=emulator, state=state).returncode == 0
    released = read_lock(AzureProvider(clients), "retired")
    assert not released.held and released.version >= 2     # taken, then freed by the apply

    destroyed = _infra("destroy", str(stack), "--auto-approve", emulator=emulator, state=state)
    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    assert clients.versions.latest(name) is None and clients.versions.list(name) == [], \
        "a version of the lock is left active after the destroy"
    archived = _numbers(clients.versions.list(name, ARCHIVED_ONLY))
    last = max(archived)
    assert archived == list(range(1, last + 1)) and last > released.version, archived   # destroy's own free one too
    assert not read_lock(AzureProvider(clients), "retired").held

    again = _infra("apply", str(stack), "--auto-approve", "--no-smoke", emulator=emulator, state=state)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _numbers(clients.versions.list(name)) == [last + 1, last + 2]   # taken and freed past the archived ones
