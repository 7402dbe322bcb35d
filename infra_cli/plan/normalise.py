"""normalise: live Azure values -> the attribute shape of desired.py, so a plan right after an apply is empty.

Takes plain values read off the SDK's entities (the provider does the reading) and irons out what Azure
fills in or spells differently: size-name case, tier spelling, idle time units, a missing public-IP flag
(Azure means true), subnet ids, identity ids, SSH access "NotSpecified", tags Azure adds.
"""

from __future__ import annotations

import re
from typing import Any

from infra_cli.plan.desired import canonical_size, normalise_location
from infra_cli.plan.model import OWNERSHIP_TAGS, TAG_HASH, TAG_PREVENT_DESTROY, TAG_SECRETS, Resource

# Tags Azure (or its portal) adds on its own; never the user's, never ours.
_AZURE_TAG = re.compile(r"^(hidden-|azureml\.|_aml_system_)", re.IGNORECASE)
_TIER = {"dedicated": "dedicated", "lowpriority": "low_priority", "low_priority": "low_priority"}


def _seconds(value: Any) -> int | None:
    """120, "120", "PT2M", "PT120S", "PT1H" -> seconds."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().upper()
    if text.isdigit():
        return int(text)
    m = re.fullmatch(r"P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?", text)
    if not m:
        return None
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int(d * 86400 + h * 3600 + mi * 60 + s)


def split_tags(tags: dict[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(the user's tags, our ownership tags)."""
    user, ours = {}, {}
    for k, v in (tags or {}).items():
        if k in OWNERSHIP_TAGS:
            ours[k] = v
        elif not _AZURE_TAG.match(k):
            user[k] = v
    return dict(sorted(user.items())), ours


def cluster_resource(values: dict[str, Any]) -> Resource:
    """values: name, size, tier, min_instances, max_instances, idle_time_before_scale_down,
    enable_node_public_ip, ssh_public_access_enabled, ssh_admin_username, subnet, identity_type,
    user_assigned_identities, location, tags, description."""
    user_tags, ours = split_tags(values.get("tags"))
    tier = _TIER.get(str(values.get("tier") or "dedicated").replace("-", "").lower(), values.get("tier"))
    identity_type = values.get("identity_type")
    identity_type = None if identity_type in (None, "none", "None") else str(identity_type).lower()
    public_ip = values.get("enable_node_public_ip")
    attributes = {
        "size": canonical_size(values.get("size") or ""),
        "tier": tier,
        "min_instances": int(values.get("min_instances") or 0),
        "max_instances": int(values.get("max_instances") or 0),
        "idle_time_before_scale_down": _seconds(values.get("idle_time_before_scale_down")),
        "enable_node_public_ip": True if public_ip is None else bool(public_ip),
        # without an admin user there is no SSH to open: Azure's resolved default is not a difference
        "ssh_public_access_enabled": bool(values.get("ssh_public_access_enabled"))
        if values.get("ssh_admin_username") else None,
        "ssh_admin_username": values.get("ssh_admin_username") or None,
        "ssh_credentials_hash": ours.get(TAG_SECRETS),
        "subnet": (values.get("subnet") or None) and str(values["subnet"]).lower(),
        "identity_type": identity_type,
        "user_assigned_identities": sorted(str(i).lower() for i in values.get("user_assigned_identities") or []),
        "location": normalise_location(values.get("location")),
        "tags": user_tags,
        "description": values.get("description") or None,
        "prevent_destroy": ours.get(TAG_PREVENT_DESTROY) == "true",
    }
    address = ours.get("infra.address") or f"cluster.{values['name']}"
    return Resource(address, "cluster", values["name"], attributes, ours)


def environment_resource(name: str, version: str | None, tags: dict[str, str] | None,
                         next_version: str | None) -> Resource:
    """A live environment version. Its content is known by the hash tag the tool wrote on it."""
    user_tags, ours = split_tags(tags)
    attributes = {"version": version, "next_version": next_version, "content_hash": ours.get(TAG_HASH),
                  "tags": user_tags}
    return Resource(ours.get("infra.address") or f"environment.{name}", "environment", name, attributes, ours)
