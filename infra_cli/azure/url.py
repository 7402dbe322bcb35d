"""Request paths made of names: each name one percent-encoded segment (no SDK import: provider.py,
environment_versions.py and clients.py build their paths with it before any client exists)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote


def segment(name: Any) -> str:
    """One segment of a request path made of a name (a compute, an environment, a version, a registry...):
    percent-encoded whole, as azure-core's serializer quotes the SDKs' path arguments (`quote(value, safe="")`),
    so a `/`, `?`, `#` or `%` in it stays inside its segment. An empty name or a dot-segment, which URL
    normalisation (RFC 3986 5.2.4, as requests and urllib3 apply it) would remove and so climb to the parent, is
    refused: names reach here read by the address grammar (stack/addresses.py) and the stack's name rules, and
    this is the last guard if one did not."""
    text = str(name)
    if text in ("", ".", ".."):
        raise ValueError(f"{text!r} cannot be a name in a request path")
    return quote(text, safe="")


def workspace_path(subscription_id: str, resource_group: str, workspace: str) -> str:
    """A workspace's ARM id, without the leading slash, each name one segment."""
    return (f"subscriptions/{segment(subscription_id)}/resourceGroups/{segment(resource_group)}"
            f"/providers/Microsoft.MachineLearningServices/workspaces/{segment(workspace)}")
