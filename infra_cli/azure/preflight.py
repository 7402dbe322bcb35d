"""Live size availability for `infra skus --location L --local` (or Azure, with AZURE_SUBSCRIPTION_ID)."""

from __future__ import annotations

import os

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.stack.model import Workspace

LOCAL_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"


def sku_availability(location: str, names: list[str], *, local: bool, cloud: str = "AzureCloud",
                     credential=None) -> dict[str, str]:
    """lower-case size name -> "available", "restricted (REASON)" or "not offered", read from `cloud`'s ARM."""
    from infra_cli.azure.clients import build_clients
    from infra_cli.azure.provider import Provider

    subscription = LOCAL_SUBSCRIPTION if local else os.environ.get("AZURE_SUBSCRIPTION_ID", "")
    workspace = Workspace(subscription_id=subscription, resource_group="infra-skus", name="infra-skus",
                          location=location, cloud=cloud)
    live = Provider(build_clients(workspace, local=local, credential=credential)).sku_offers(workspace.location)
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
