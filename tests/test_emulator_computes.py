"""Computes through the real azure-ai-ml client against the emulator: LROs, in-place scale changes and
Azure's refusals (immutable fields, quota, restricted sizes, names), plus region facts via both SDKs."""

from __future__ import annotations

import contextlib

import pytest
from azure.ai.ml.entities import AmlCompute, NetworkSettings
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

from emulator_fixtures import TEST_PROVISIONING_DELAY_S, start_emulator


def _cluster(name="gpu", size="Standard_ND96asr_v4", max_instances=2, **kw) -> AmlCompute:
    return AmlCompute(name=name, size=size, min_instances=0, max_instances=max_instances,
                      idle_time_before_scale_down=900, **kw)


def test_create_update_delete_with_long_running_operations(clients, emulator):
    created = clients.ml.compute.begin_create_or_update(_cluster()).result()
    # Azure answers the size upper-cased (its recorded Compute/get/AmlCompute.json: "STANDARD_NC6")
    assert (created.size, created.max_instances, created.provisioning_state) == ("STANDARD_ND96ASR_V4", 2, "Succeeded")
    polls = emulator.stats.matching("GET", "computeOperationsStatus")
    # the SDK polled the Azure-AsyncOperation URL, when the emulator's retry-after said the create was due
    assert 1 <= len(polls) <= 2

    # Scale settings change in place: the same cluster, one PUT, no delete.
    created.max_instances, created.min_instances = 1, 1
    emulator.stats.reset()
    updated = clients.ml.compute.begin_update(created).result()
    assert (updated.max_instances, updated.min_instances) == (1, 1)
    assert [r.method for r in emulator.stats.records if r.method != "GET"] == ["PUT"]

    clients.ml.compute.begin_delete("gpu").result()
    assert [c.name for c in clients.ml.compute.list()] == []
    with pytest.raises(ResourceNotFoundError) as info:
        clients.ml.compute.get("gpu")
    assert info.value.error.code == "ResourceNotFound"


def test_list_follows_next_link(clients, emulator):
    emulator.backend.page_size = 2
    for name in ("c-one", "c-two", "c-three"):
        clients.ml.compute.begin_create_or_update(_cluster(name, "Standard_NC24ads_A100_v4", 1))
    assert sorted(c.name for c in clients.ml.compute.list()) == ["c-one", "c-three", "c-two"]
    assert any("skipToken" in r.path or r.path.endswith("/computes") for r in emulator.stats.matching("GET", "/computes"))
    assert len(emulator.stats.matching("GET", "/computes")) >= 2


@pytest.mark.parametrize("change, field", [
    ({"size": "Standard_ND96amsr_A100_v4"}, "vmSize"),
    ({"tier": "low_priority"}, "vmPriority"),
    ({"enable_node_public_ip": False}, "enableNodePublicIp"),
    ({"network_settings": NetworkSettings(subnet="/subscriptions/x/resourceGroups/y/providers/Microsoft.Network/"
                                                 "virtualNetworks/v/subnets/s")}, "subnet"),
])
def test_immutable_field_change_is_refused(clients, change, field):
    clients.ml.compute.begin_create_or_update(_cluster()).result()
    with pytest.raises(HttpResponseError) as info:
        clients.ml.compute.begin_create_or_update(_cluster(**change)).result()
    assert info.value.error.code == "PropertyChangeNotAllowed"
    assert field in info.value.error.message and "delete the compute" in info.value.error.message
    assert clients.ml.compute.get("gpu").size == "STANDARD_ND96ASR_V4"   # unchanged, in Azure's spelling


@contextlib.contextmanager
def _clients_under_quota(tmp_path, test_workspace, quota: str):
    """The SDK clients of an emulator whose eastus offers every size under `quota` (world.yaml's quota: block)."""
    from infra_cli.commands.backend import build_clients

    world = tmp_path / "world.yaml"
    world.write_text(f"regions: {{eastus: {{offers: all}}}}\nquota: {quota}\n")
    with start_emulator(tmp_path / "local", world=world) as server:
        yield build_clients(test_workspace, local=True, emulator=server)


def test_quota_is_enforced_on_create_with_needed_and_available(tmp_path, test_workspace):
    quota = "{default_family_limit: 100, families: {standardNDASv4_A100Family: 96}}"
    with _clients_under_quota(tmp_path, test_workspace, quota) as clients:
        with pytest.raises(HttpResponseError) as info:
            clients.ml.compute.begin_create_or_update(_cluster(max_instances=2))
        assert info.value.error.code == "QuotaExceeded"
        message = info.value.error.message
        assert "'Standard NDASv4_A100 Family Cluster Dedicated vCPUs'" in message and "Current Limit: 96" in message
        assert "Additional Required: 192" in message and "Current Usage: 0" in message
        clients.ml.compute.begin_create_or_update(_cluster(max_instances=1)).result()
        usages = {u.name.value: (u.current_value, u.limit) for u in clients.compute.usage.list("eastus")}
        assert usages["standardNDASv4_A100Family"] == (96, 96)
        # Growing the cluster beyond the quota is refused too; the cluster stays as it was.
        with pytest.raises(HttpResponseError) as info:
            clients.ml.compute.begin_create_or_update(_cluster(max_instances=2))
        assert info.value.error.code == "QuotaExceeded"


def test_low_priority_nodes_draw_on_the_regions_low_priority_total_not_the_family(tmp_path, test_workspace):
    quota = "{default_family_limit: 96, total_low_priority_limit: 200, total_dedicated_limit: 1000}"
    with _clients_under_quota(tmp_path, test_workspace, quota) as clients:
        # 192 low-priority vCPUs: past the family's 96 dedicated, within the 200 low-priority total
        clients.ml.compute.begin_create_or_update(_cluster(max_instances=2, tier="low_priority")).result()
        with pytest.raises(HttpResponseError) as info:
            clients.ml.compute.begin_create_or_update(_cluster(name="gpu2", max_instances=1, tier="low_priority"))
        assert "'Total Cluster LowPriority Regional vCPUs'" in info.value.error.message
        assert "Current Usage: 192" in info.value.error.message
        clients.ml.compute.begin_create_or_update(_cluster(name="gpu3", max_instances=1)).result()   # dedicated: its own pools


def test_restricted_or_unoffered_size_is_refused(clients, test_workspace):
    with pytest.raises(HttpResponseError) as info:
        clients.ml.compute.begin_create_or_update(_cluster(size="Standard_ND96isr_H200_v5", location="westus2"))
    assert info.value.error.code == "SkuNotAvailable"
    assert "NotAvailableForSubscription" in info.value.error.message
    with pytest.raises(HttpResponseError) as info:
        clients.ml.compute.begin_create_or_update(_cluster(size="Standard_NC24r"))   # retired: offered nowhere
    assert info.value.error.code == "SkuNotAvailable"


@pytest.mark.parametrize("name", ["a", "1gpu", "gpu-", "gpu_cluster", "x" * 25])
def test_invalid_compute_names_are_refused(clients, name):
    with pytest.raises(HttpResponseError) as info:
        clients.ml.compute.begin_create_or_update(_cluster(name=name))
    assert info.value.status_code == 400 and info.value.error.code == "ValidationError"


def test_patch_changes_scale_settings_in_place(clients, emulator):
    import requests

    clients.ml.compute.begin_create_or_update(_cluster()).result()
    url = (f"{emulator.url}subscriptions/{clients.subscription_id}/resourceGroups/{clients.resource_group}/providers/"
           f"Microsoft.MachineLearningServices/workspaces/{clients.workspace_name}/computes/gpu"
           "?api-version=2023-08-01-preview")
    # ClusterUpdateParameters as Azure's Compute/patch.json sends it
    r = requests.patch(url, json={"properties": {"properties": {"scaleSettings": {"maxNodeCount": 1}}}},
                       headers={"Authorization": f"Bearer {emulator.token}"}, verify=str(emulator.cert_path))
    assert r.status_code == 200 and "Azure-AsyncOperation" in r.headers
    assert r.json()["properties"]["provisioningState"] == "Updating"
    import time

    time.sleep(TEST_PROVISIONING_DELAY_S + 0.1)
    assert clients.ml.compute.get("gpu").max_instances == 1


def test_region_facts_through_both_sdks(clients):
    skus = {s.name: s for s in clients.compute.resource_skus.list(filter="location eq 'westus2'")}
    a100 = {c.name: c.value for c in skus["Standard_ND96asr_v4"].capabilities}
    assert (a100["RdmaEnabled"], a100["GPUs"], a100["vCPUs"]) == ("True", "8", "96")
    assert {c.name: c.value for c in skus["Standard_NC24ads_A100_v4"].capabilities}["RdmaEnabled"] == "False"
    assert skus["Standard_ND96isr_H200_v5"].restrictions[0].reason_code == "NotAvailableForSubscription"
    assert "Standard_NC24r" not in skus
    ml_sizes = {s.name for s in clients.ml.compute.list_sizes(location="westus2")}
    assert "Standard_ND96asr_v4" in ml_sizes and "Standard_ND96isr_H200_v5" not in ml_sizes
    # Azure ML's own quota, named as its Usage/list.json example names it
    usage = {u.name["value"]: u for u in clients.ml.compute.list_usage(location="eastus")}
    assert usage["Standard NDASv4_A100 Family Cluster Dedicated vCPUs"].limit == 960
    assert usage["Standard NDASv4_A100 Family Cluster LowPriority vCPUs"].limit == -1
    assert usage["Total Cluster Dedicated Regional vCPUs"].type == "Microsoft.MachineLearningServices/dedicatedCores/usages"
    assert usage["Total Cluster LowPriority Regional vCPUs"].limit == 960
