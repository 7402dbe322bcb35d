"""The cluster field table (infra_cli/stack/cluster_fields.py) is the one list of a cluster's fields: every
attribute the five readers and writers produce is a row of it, every name a row uses exists, every stack
path is in the stack model, every REST path is in Azure's ComputeResource specification, every keyword is
AmlCompute's, and validators/update_semantics.yaml classifies every row."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra_cli.apply.files import compute_document
from infra_cli.conventions import TAG_PREVENT_DESTROY, TAG_SECRETS
from infra_cli.azure.compute_codec import REST_READERS, compute_values
from infra_cli.knowledge import update_semantics
from infra_cli.plan.kinds.cluster import cluster_attributes, cluster_resource
from infra_cli.stack.cluster_fields import (CLUSTER_FIELDS, DESIRED, FIELDS, LIVE, NORMALISERS, PROVISIONING_KEYS,
                                            RENDER, RENDER_KINDS, REST, SDK, rows)
from infra_cli.stack.model import Cluster, Workspace

CONTRACT = Path(__file__).parent / "contract"
sys.path.insert(0, str(CONTRACT))
import spec_schema  # noqa: E402  (tests/contract's reader of Azure's REST specification)

CLUSTER = Cluster.model_validate({
    "size": "Standard_ND96asr_v4", "tier": "LowPriority", "min_instances": 1, "max_instances": 4,
    "idle_time_before_scale_down": 300, "enable_node_public_ip": False, "ssh_public_access_enabled": True,
    "ssh_settings": {"admin_username": "azureuser", "ssh_key_value": "ssh-ed25519 AAAA"},
    "network_settings": {"vnet_name": "vnet", "subnet": "default"},
    "identity": {"type": "UserAssigned", "user_assigned_identities": [{"resource_id": "/subscriptions/x/id"}]},
    "location": "East US", "tags": {"team": "ml"}, "description": "every field set",
    "lifecycle": {"prevent_destroy": True}})
STACK = SimpleNamespace(stack="s", workspace=Workspace(subscription_id="00000000-0000-0000-0000-000000000000",
                                                       resource_group="rg", name="ws", location="eastus"))


def _failed_amlcompute() -> dict:
    """Azure's recorded AmlCompute GET, with what it leaves out added: identity, tags, credentials, a failure."""
    example = CONTRACT / "fixtures/machinelearningservices/2024-10-01/Compute/get/AmlCompute.json"
    body = json.loads(example.read_text())["responses"]["200"]["body"]
    body["identity"] = {"type": "UserAssigned", "userAssignedIdentities": {"/subscriptions/x/id": {}}}
    body["tags"] = {"team": "ml", TAG_SECRETS: "abc", TAG_PREVENT_DESTROY: "true"}
    body["properties"]["properties"]["userAccountCredentials"] = {"adminUserName": "azureuser"}
    body["properties"]["provisioningState"] = "Failed"
    body["properties"]["provisioningErrors"] = [{"error": {"code": "QuotaExceeded", "message": "no quota"}}]
    return body


def unlisted(keys, known) -> list[str]:
    return sorted(set(keys) - set(known))


def test_the_check_names_what_the_table_lacks():
    assert unlisted(["size", "gpu_driver"], FIELDS) == ["gpu_driver"]


def test_desired_attributes_are_the_rows_with_a_stack_field():
    attributes = cluster_attributes(STACK, "gpu", CLUSTER)
    assert not unlisted(attributes, FIELDS), "add these to infra_cli/stack/cluster_fields.py"
    assert list(attributes) == [f.attribute for f in CLUSTER_FIELDS if f.stack is not None]


def test_compute_values_keys_are_rows():
    values = compute_values(_failed_amlcompute())
    assert not unlisted(values, {"name", "compute_type"} | {f.value_key for f in CLUSTER_FIELDS})
    assert set(values) - {"name", "compute_type"} == {f.value_key for f in CLUSTER_FIELDS if f.rest}
    assert values["ssh_admin_username"] == "azureuser" and values["provisioning_errors"] == "QuotaExceeded"


def test_live_attributes_are_rows_and_a_plan_right_after_an_apply_compares_equal():
    live = cluster_resource(compute_values(_failed_amlcompute())).attributes
    assert not unlisted(live, FIELDS)
    assert list(live) == [f.attribute for f in CLUSTER_FIELDS]  # a failed cluster carries provisioning_* too
    assert live["provisioning_error"] == "QuotaExceeded" and live["prevent_destroy"] is True
    assert live["ssh_credentials_hash"] == "abc"
    assert live["tags"] == {"team": "ml"}


def test_rendered_fields_are_rows():
    doc = compute_document("gpu", CLUSTER)
    rendered = {f.stack.split(".")[0] for f in rows(RENDER)}
    assert not unlisted(set(doc) - {"$schema", "name", "type"}, rendered)
    assert set(doc) - {"$schema", "name", "type"} == rendered
    assert doc["ssh_settings"] == {"admin_username": "azureuser"}  # the key is a secret: never written


def test_every_row_names_what_exists():
    for f in CLUSTER_FIELDS:
        assert f.normalise in NORMALISERS and f.read in REST_READERS and f.render in RENDER_KINDS, f
        assert set(f.explicit) <= {DESIRED, LIVE, REST, SDK, RENDER}, f
        assert not f.explicit or f.note, f"{f.attribute}: say who handles it and why"
    assert PROVISIONING_KEYS == ("provisioning_state", "provisioning_error", "provisioning_since")


def _model_has(path: str) -> bool:
    model = Cluster
    for step in path.split("."):
        field = model.model_fields.get(step) if model is not None else None
        if field is None:
            return False
        model = field.model
    return True


@pytest.mark.parametrize("field", [f for f in CLUSTER_FIELDS if f.stack], ids=lambda f: f.attribute)
def test_stack_paths_are_in_the_stack_model(field):
    assert _model_has(field.stack), f"{field.stack} is not a field of stack.cluster.Cluster"


def _spec_has(path: str) -> bool:
    """`path` through ComputeResource in Azure's 2024-10-01 specification (an AmlCompute's own properties)."""
    node = spec_schema._flattened(spec_schema.COMPUTE_SPEC + "#/definitions/ComputeResource")
    for step in path.split("."):
        prop = (node.get("properties") or {}).get(step)
        if prop is None:
            return False
        ref = prop.get("$ref")
        if ref and "discriminator" in spec_schema._lookup(ref):
            ref = dict(spec_schema._subtypes(ref))["AmlCompute"]
        node = spec_schema._flattened(ref) if ref else prop
    return True


@pytest.mark.parametrize("path", sorted({p for f in CLUSTER_FIELDS for p in f.rest}))
def test_rest_paths_are_in_azures_specification(path):
    assert _spec_has(path), f"{path} is not in ComputeResource (tests/contract/fixtures/schemas)"
    assert not _spec_has(path + "Typo")  # the walk can fail


def test_sdk_keywords_are_amlcomputes():
    from azure.ai.ml.entities import AmlCompute

    # location and friends reach Compute's __init__ through **kwargs
    accepted = {p for c in AmlCompute.__mro__ if "__init__" in vars(c) and c is not object
                for p in inspect.signature(c.__init__).parameters} - {"self", "kwargs"}
    assert not unlisted({f.sdk for f in CLUSTER_FIELDS if f.sdk}, accepted)


def test_update_semantics_classifies_every_row():
    rules = update_semantics.semantics("cluster")
    unclassified = [f.attribute for f in CLUSTER_FIELDS if f.compared and not rules.classified(f.attribute)]
    assert not unclassified, f"classify {unclassified} in validators/update_semantics.yaml"
    # the rows that are not compared are live state: cluster_provisioning says which states replace a cluster
    assert all(not f.compared for f in CLUSTER_FIELDS if f.attribute.startswith("provisioning_"))
    assert update_semantics.provisioning_rules().replace
