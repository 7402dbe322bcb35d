"""The local Azure answers a low-priority cluster of a size Azure ML runs only as dedicated as Azure does (issue 41):
created, provisioning Succeeded, with UnsupportedVMSizeForLowPriority in the cluster's errors
(validators/skus.yaml low_priority: false and its low_priority_source); the same size dedicated has no error."""

from __future__ import annotations

from test_emulator_computes import _cluster

H100 = "Standard_ND96isr_H100_v5"


def _errors(clients, name: str) -> list:
    rest = clients.ml.compute._operation.get(clients.resource_group, clients.workspace_name, name)
    return [e.error.code for e in (rest.properties.properties.errors or [])]


def test_a_low_priority_h100_cluster_is_created_with_azure_s_error(clients):
    created = clients.ml.compute.begin_create_or_update(
        _cluster(name="lowh100", size=H100, max_instances=1, tier="low_priority")).result()
    assert created.provisioning_state == "Succeeded"
    assert _errors(clients, "lowh100") == ["UnsupportedVMSizeForLowPriority"]
    clients.ml.compute.begin_create_or_update(_cluster(name="dedh100", size=H100, max_instances=1)).result()
    assert _errors(clients, "dedh100") == []
