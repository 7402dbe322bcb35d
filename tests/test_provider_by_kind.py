"""The Provider by kind (azure/kinds.py AZURE_KINDS): `list(kind)`, `read(kind, name)`, `write(kind, resource, ...)`
and `delete(kind, name, ...)` answer what the kind's own operations answer, against the local Azure (the emulator
held to Azure's REST specifications), so an engine that calls the generic ones reads and writes the same."""

from __future__ import annotations

from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE
from infra_cli.azure.provider import AzureProvider
from infra_cli.conventions import TAG_STACK
from infra_cli.plan.kinds.cluster import ClusterSecrets
from infra_cli.plan.model import Resource


def _cluster(name: str, size: str = "Standard_D4s_v3") -> Resource:
    attributes = {"size": size, "tier": "dedicated", "min_instances": 0, "max_instances": 1,
                  "idle_time_before_scale_down": 120, "location": TEST_LOCATION, "tags": {}}
    return Resource(f"cluster.{name}", "cluster", name, attributes, {TAG_STACK: "kinds"})


def _image_environment(name: str, version: str) -> Resource:
    attributes = {"kind": "image", "image": "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest",
                  "version": version, "description": None, "tags": {}}
    return Resource(f"environment.{name}", "environment", name, attributes, {TAG_STACK: "kinds"})


def test_a_cluster_is_written_read_listed_and_deleted_by_its_kind(tmp_path, emulator, clients):
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    provider = AzureProvider(clients)
    assert provider.read("cluster", "cpu1") is None
    provider.write("cluster", _cluster("cpu1"), secrets=ClusterSecrets())
    read = provider.read("cluster", "cpu1")
    assert read is not None and read == provider.read_compute("cpu1")
    assert read["size"].lower() == "standard_d4s_v3" and read["tags"][TAG_STACK] == "kinds"
    assert [v["name"] for v in provider.list("cluster")] == [v["name"] for v in provider.list_computes()] == ["cpu1"]
    provider.delete("cluster", "cpu1")
    assert provider.read("cluster", "cpu1") is None and provider.list("cluster") == []


def test_an_environment_is_registered_read_listed_and_archived_by_its_kind(tmp_path, emulator, clients):
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    provider = AzureProvider(clients)
    for version in ("1", "2"):
        provider.write("environment", _image_environment("env1", version), base_dir=tmp_path)
    assert provider.read("environment", "env1") == provider.read_environments({"env1": None})["env1"]
    pinned = provider.read("environment", "env1", "1")
    assert pinned is not None and pinned["version"] == "1" and pinned["next_version"] == "3"
    assert provider.list("environment") == [{"name": "env1", "latest_version": "2"}]
    # Azure ML never deletes a version: the stack's are archived, and none is live after
    assert sorted(provider.delete("environment", "env1", stack="kinds")) == ["1", "2"]
    assert provider.read("environment", "env1")["version"] is None
