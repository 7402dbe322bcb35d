"""Live size availability for `infra skus --location L --local` (or Azure, with AZURE_SUBSCRIPTION_ID)."""

from __future__ import annotations

import os
from typing import Any

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.stack.model import Workspace

LOCAL_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"


def availability_workspace(location: str, *, local: bool, cloud: str = "AzureCloud") -> Workspace:
    """The workspace whose subscription the sizes of `location` are read in (no workspace is read or made)."""
    subscription = LOCAL_SUBSCRIPTION if local else os.environ.get("AZURE_SUBSCRIPTION_ID", "")
    return Workspace(subscription_id=subscription, resource_group="infra-skus", name="infra-skus",
                     location=location, cloud=cloud)


def sku_availability(provider: Any, workspace: Workspace, names: list[str]) -> dict[str, str]:
    """lower-case size name -> "available", "restricted (REASON)" or "not offered", read through `provider`
    (built by the command for `workspace`) in the workspace's location."""
    location, subscription = workspace.location, workspace.subscription_id
    live = provider.sku_offers(location)
    if live is None:
        raise DiagnosticError([Diagnostic(
            "error", "skus.forbidden", f"this identity may not read the VM sizes of subscription {subscription}",
            hint="sign in with a role that reads Microsoft.Compute/skus at the subscription (Reader does), or "
                 "list sizes without --location")])
    if not live:  # every region offers some sizes: an empty answer means the name is not a region
        raise DiagnosticError([Diagnostic(
            "error", "skus.unknown-location", f"Azure offers no VM sizes in {location!r}: it is not a region name",
            hint="use a region's programmatic name, e.g. eastus, westus3, southcentralus (az account list-locations)")])
    out = {}
    for name in names:
        sku = live.get(name.lower())
        out[name.lower()] = ("not offered" if sku is None
                             else f"restricted ({', '.join(sku['restrictions'])})" if sku["restrictions"]
                             else "available")
    return out
