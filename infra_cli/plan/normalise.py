"""normalise: live Azure values -> the attribute shape of desired.py, so a plan right after an apply is empty.

Takes plain values read off the SDK's entities (the provider does the reading) and irons out what Azure
fills in or spells differently: size-name case, tier spelling, idle time units, a missing public-IP flag
(Azure means true), subnet ids, identity ids, SSH access "NotSpecified", tags Azure adds.

A cluster's provisioningState is kept only when it is not Succeeded (provisioning_state, provisioning_error,
provisioning_since): a healthy cluster's attributes are exactly those the stack describes, and plan can see
a failed, canceled, deleting or long-creating one for what it is.
"""

from __future__ import annotations

import re
from typing import Any

from infra_cli.conventions import OWNERSHIP_TAGS, TAG_ADDRESS, TAG_HASH, TAG_PREVENT_DESTROY, TAG_SECRETS
from infra_cli.plan.model import Resource
from infra_cli.stack.cluster_fields import CLUSTER_FIELDS, LIVE, PROVISIONING_KEYS, normalised

# Where Azure's answer carries an AmlCompute's own settings (null while it is created: azure/compute_codec.py)
UNREPORTED_PREFIX = "properties.properties."
# Tags Azure (or its portal) adds on its own; never the user's, never ours.
_AZURE_TAG = re.compile(r"^(hidden-|azureml\.|_aml_system_)", re.IGNORECASE)


def split_tags(tags: dict[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(the user's tags, our ownership tags)."""
    user, ours = {}, {}
    for k, v in (tags or {}).items():
        if k in OWNERSHIP_TAGS:
            ours[k] = v
        elif not _AZURE_TAG.match(k):
            user[k] = v
    return dict(sorted(user.items())), ours


def _provisioning(values: dict[str, Any]) -> dict[str, Any]:
    """provisioning_* attributes of a cluster whose provisioningState is known and not Succeeded."""
    state = values.get("provisioning_state")
    state = getattr(state, "value", state)  # azure-ai-ml hands an enum
    if state is None or str(state).lower() == "succeeded":
        return {}
    state = str(state)
    state = state[:1].upper() + state[1:]
    error = values.get("provisioning_errors")
    if isinstance(error, list):  # the REST shape: [{"error": {"code", "message"}}]
        first = (error[0] or {}).get("error", {}) if error and isinstance(error[0], dict) else {}
        error = ": ".join(str(x) for x in (first.get("code"), first.get("message")) if x) or None
    since = values.get("created_on") if state.lower() in ("creating", "updating") else None
    return {"provisioning_state": state, "provisioning_error": str(error) if error else None,
            "provisioning_since": str(since) if since else None}


def without_provisioning(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k not in PROVISIONING_KEYS}


def cluster_resource(values: dict[str, Any]) -> Resource:
    """values: compute_values' (azure/compute_codec.py), keyed as stack/cluster_fields.py's `value_key`: plain fields
    are normalised through the table, the composite ones (SSH, our tags, provisioning) here, in the table's order;
    provisioning_errors is the first error's code, as azure-ai-ml keeps it, or the REST list."""
    user_tags, ours = split_tags(values.get("tags"))
    provisioning = _provisioning(values)
    explicit = {
        # without an admin user there is no SSH to open: Azure's resolved default is not a difference
        "ssh_public_access_enabled": bool(values.get("ssh_public_access_enabled"))
        if values.get("ssh_admin_username") else None,
        "ssh_credentials_hash": ours.get(TAG_SECRETS),
        "tags": user_tags,
        "prevent_destroy": ours.get(TAG_PREVENT_DESTROY) == "true",
        **provisioning,
    }
    attributes = {f.attribute: normalised(f, values.get(f.value_key)) if f.plain(LIVE) else explicit[f.attribute]
                  for f in CLUSTER_FIELDS if f.plain(LIVE) or f.attribute in explicit}
    if values.get("settings_reported") is False:  # still Creating, or its properties null: unknown, not defaults
        attributes.update({f.attribute: None for f in CLUSTER_FIELDS
                           if f.compared and any(r.startswith(UNREPORTED_PREFIX) for r in f.rest)})
    address = ours.get(TAG_ADDRESS) or f"cluster.{values['name']}"
    return Resource(address, "cluster", values["name"], attributes, ours)


def other_compute_resource(name: str, compute_type: str) -> Resource:
    """A compute of another kind than AmlCompute (AKS, a compute instance, ...) holding a cluster's name: never
    infra's to change or adopt, so it carries no attributes to compare, only what it is."""
    return Resource(f"cluster.{name}", "cluster", name, {"compute_type": compute_type}, {})


def is_other_compute(resource: Resource) -> bool:
    # by name: a workspace's computes share one namespace, so another compute is read as the cluster kind's live
    # resource (other_compute_resource above); this module sits below plan/kinds, which read it
    return resource.type == "cluster" and set(resource.attributes) == {"compute_type"}


def environment_resource(name: str, version: str | None, tags: dict[str, str] | None,
                         next_version: str | None) -> Resource:
    """A live environment version. Its content is known by the hash tag the tool wrote on it."""
    user_tags, ours = split_tags(tags)
    attributes = {"version": version, "next_version": next_version, "content_hash": ours.get(TAG_HASH),
                  "tags": user_tags}
    return Resource(ours.get(TAG_ADDRESS) or f"environment.{name}", "environment", name, attributes, ours)
