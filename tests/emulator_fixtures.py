"""Fixtures for tests that need the local Azure emulator and real SDK clients pointed at it.

tests/conftest.py makes the fixtures available to every test; constants and start_emulator are imported by
name (tests/ is on sys.path):

    def test_something(clients, emulator):
        clients.ml.compute.get("gpu")
        assert emulator.stats.writes == 0
"""

from __future__ import annotations

import pytest

from infra_cli.emulator.faults import FaultConfig
from infra_cli.emulator.server import EmulatorServer
from infra_cli.stack.model import Workspace

TEST_SUBSCRIPTION = "00000000-0000-0000-0000-0000000000a1"
TEST_RESOURCE_GROUP = "rg-test"
TEST_WORKSPACE = "mlw-test"
TEST_LOCATION = "eastus"
# The `workspace:` block of a stack on the test workspace, as stack files write it.
WORKSPACE_YAML = f"""workspace:
  subscription_id: {TEST_SUBSCRIPTION}
  resource_group: {TEST_RESOURCE_GROUP}
  name: {TEST_WORKSPACE}
  location: {TEST_LOCATION}
"""
# Short enough for fast tests, long enough that a client must really poll the operation.
TEST_PROVISIONING_DELAY_S = 0.2


def start_emulator(state_dir, **faults) -> EmulatorServer:
    """A started emulator over state_dir; keyword arguments are FaultConfig fields (world=PATH too)."""
    world = faults.pop("world", None)
    faults.setdefault("provisioning_delay_s", TEST_PROVISIONING_DELAY_S)
    return EmulatorServer(state_dir, faults=FaultConfig(**faults), world=world).start()


@pytest.fixture
def emulator(tmp_path):
    """A running emulator over a fresh state directory (tmp_path / "local")."""
    server = start_emulator(tmp_path / "local")
    yield server
    server.stop()


@pytest.fixture
def test_workspace() -> Workspace:
    return Workspace(subscription_id=TEST_SUBSCRIPTION, resource_group=TEST_RESOURCE_GROUP, name=TEST_WORKSPACE,
                     location=TEST_LOCATION)


@pytest.fixture
def clients(emulator, test_workspace):
    """AzureClients (real MLClient and ComputeManagementClient) for the test workspace on the emulator."""
    from infra_cli.commands.backend import build_clients

    return build_clients(test_workspace, local=True, emulator=emulator)


def running_apply(stack, env: dict, *, until: str = "cluster.gpu: creating"):
    """A real `infra apply STACK --local` subprocess, returned once it printed a line starting with `until` (by
    default: its cluster is being created, so it holds the stack's lock and runs on; give the emulator a long
    provisioning delay). stdout is read up to that line; the rest comes with communicate()."""
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", "apply", str(stack), "--local", "--auto-approve",
                             "--no-smoke"], cwd=Path(__file__).resolve().parents[1],
                            env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(until):
            return proc
    proc.wait(timeout=60)
    raise AssertionError(f"the apply ended before it printed {until!r}:\n" + "".join(seen) + proc.stderr.read())
