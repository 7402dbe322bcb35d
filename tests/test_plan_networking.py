"""Networking as Azure ML decides it (issue 32).

`enable_node_public_ip: false` without a subnet: Azure ML creates such a cluster in a workspace with a managed
virtual network (its nodes live in it: https://learn.microsoft.com/azure/machine-learning/how-to-managed-network-compute,
and Microsoft's how-to creates one with `az ml compute create --type AmlCompute --set enable_node_public_ip=False`;
the same request is why hashicorp/terraform-provider-azurerm#25901 made the subnet optional). Without a managed
network it needs a subnet (https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet).
Offline the workspace is unknown, so validate warns; `infra plan` reads the workspace's
properties.managedNetwork.isolationMode (workspaceRP.json ManagedNetworkSettings: Disabled, AllowInternetOutbound,
AllowOnlyApprovedOutbound) and makes it an error only where the workspace has none. The emulator's workspace carries
the mode its world file sets (`workspace: {managed_network: ...}`), and refuses the cluster as Azure does.

`ssh_public_access_enabled: true` without ssh_settings: accepted (azure-ai-ml sends it, Azure's recorded GETs show
clusters so), with a warning that nobody can log in.
"""

from __future__ import annotations

import pytest
from azure.ai.ml.entities import AmlCompute
from azure.core.exceptions import HttpResponseError
from emulator_fixtures import WORKSPACE_YAML, start_emulator

from infra_cli.azure.provider import AzureProvider
from infra_cli.emulator.world import DEFAULT_WORLD
from infra_cli.plan.engine import load_for_plan, plan_stack
from infra_cli.validate.engine import validate_files

NO_PUBLIC_IP = ("stack: no-public-ip\n" + WORKSPACE_YAML
                + "clusters:\n  cpu:\n    size: Standard_DS3_v2\n    max_instances: 2\n    enable_node_public_ip: false\n")


def _managed_world(tmp_path, mode: str):
    world = tmp_path / "world.yaml"
    world.write_text(DEFAULT_WORLD.read_text(encoding="utf-8").replace("managed_network: Disabled",
                                                                        f"managed_network: {mode}"), encoding="utf-8")
    return world


def _plan(tmp_path, text: str, clients):
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    loaded, warnings = load_for_plan(path)
    return path, plan_stack(loaded, AzureProvider(clients), warnings=warnings).plan


def _rules(plan, rule: str) -> list[tuple[str, int]]:
    return [(d.severity, d.line) for d in plan.diagnostics if d.rule == rule]


def test_validate_warns_offline(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text(NO_PUBLIC_IP, encoding="utf-8")
    found = [d for d in validate_files([path]) if d.rule == "cluster.public-ip-without-subnet"]
    assert [(d.severity, d.line) for d in found] == [("warning", NO_PUBLIC_IP.count("\n"))]
    assert "managed virtual network" in found[0].message and "infra plan" in found[0].message


def test_plan_refuses_it_in_a_workspace_without_a_managed_network(tmp_path, clients):
    """The emulator's default world: a workspace with isolationMode Disabled, as Azure creates one by default."""
    assert AzureProvider(clients).read_workspace()["isolation_mode"] == "Disabled"
    path, plan = _plan(tmp_path, NO_PUBLIC_IP, clients)
    line = NO_PUBLIC_IP.count("\n")
    assert _rules(plan, "cluster.public-ip-without-subnet") == [("error", line)]   # once, as an error (not also
    found = next(d for d in plan.diagnostics if d.rule == "cluster.public-ip-without-subnet")  # validate's warning)
    assert "Disabled" in found.message and "subnet" in found.hint
    # the emulator refuses the same cluster, as Azure does
    with pytest.raises(HttpResponseError) as info:
        clients.ml.compute.begin_create_or_update(AmlCompute(name="cpu", size="Standard_DS3_v2", max_instances=2,
                                                             enable_node_public_ip=False)).result()
    assert info.value.status_code == 400 and "managed virtual network" in str(info.value)


def test_a_subnet_is_enough_anywhere(tmp_path, clients):
    text = NO_PUBLIC_IP + "    network_settings: {subnet: /subscriptions/0/resourceGroups/rg/providers/" \
                          "Microsoft.Network/virtualNetworks/v/subnets/s}\n"
    _, plan = _plan(tmp_path, text, clients)
    assert _rules(plan, "cluster.public-ip-without-subnet") == []


@pytest.mark.parametrize("mode", ["AllowInternetOutbound", "AllowOnlyApprovedOutbound"])
def test_a_managed_network_takes_it(tmp_path, test_workspace, mode):
    from infra_cli.commands.backend import build_clients

    server = start_emulator(tmp_path / "local", world=_managed_world(tmp_path, mode))
    try:
        clients = build_clients(test_workspace, local=True, emulator=server)
        assert AzureProvider(clients).read_workspace() == {"location": "eastus", "isolation_mode": mode}
        _, plan = _plan(tmp_path, NO_PUBLIC_IP, clients)
        assert _rules(plan, "cluster.public-ip-without-subnet") == []
        assert not [d for d in plan.diagnostics if d.severity == "error"], plan.diagnostics
        created = clients.ml.compute.begin_create_or_update(AmlCompute(
            name="cpu", size="Standard_DS3_v2", max_instances=2, enable_node_public_ip=False)).result()
        assert created.enable_node_public_ip is False and created.provisioning_state == "Succeeded"
    finally:
        server.stop()


def test_ssh_access_without_credentials_plans_with_a_warning(tmp_path, clients):
    text = ("stack: ssh-open\n" + WORKSPACE_YAML
            + "clusters:\n  cpu:\n    size: Standard_DS3_v2\n    max_instances: 1\n    ssh_public_access_enabled: true\n")
    _, plan = _plan(tmp_path, text, clients)
    assert _rules(plan, "cluster.ssh-settings") == [("warning", text.count("\n"))]
    assert not [d for d in plan.diagnostics if d.severity == "error"], plan.diagnostics
    assert [c.address for c in plan.changes] == ["cluster.cpu"]
