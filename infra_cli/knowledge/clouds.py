"""validators/clouds.yaml: Azure's clouds (public, US Government, China) as the SDKs' own metadata describes them.

`workspace.cloud` names one; the ARM endpoint, the token scope, the sign-in authority and Azure ML's registry
discovery follow it (azure/clients.py), and `infra image check` asks Entra ID of a registry's cloud for ACR's
token (image/auth.py). tests/test_sovereign_clouds.py holds the file equal to the installed SDKs' metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from infra_cli.knowledge.reader import at, load, mapping

FILE = "clouds.yaml"
HINT = ("fix validators/clouds.yaml: each cloud under `clouds:` needs resource_manager and registry_discovery_endpoint "
        "(https URLs), authority_host (a host name) and container_registry_suffix (like .azurecr.io)")


@dataclass(frozen=True)
class Cloud:
    name: str
    resource_manager: str            # https://management.azure.com/
    authority_host: str              # login.microsoftonline.com (azure.identity's AzureAuthorityHosts)
    registry_discovery_endpoint: str
    container_registry_suffix: str   # .azurecr.io

    @property
    def arm_scope(self) -> str:
        """The token scope of Azure Resource Manager (and of Azure ML's registries), as MLClient asks it."""
        return scope_of(self.resource_manager)


def scope_of(resource: str) -> str:
    """A resource's token scope: `{resource}/.default` (azure-ai-ml's _resource_to_scopes of the stripped URL)."""
    return resource.rstrip("/") + "/.default"


def _https(value: Any) -> str:
    parts = urlsplit(str(value))
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{value!r} is not an https URL")
    return str(value)


def _clouds(data: Any) -> dict[str, Cloud]:
    out = {}
    for name, row in mapping(mapping(data, FILE)["clouds"], "clouds").items():
        with at("clouds", name):
            row = mapping(row, "a cloud")
            host, suffix = str(row["authority_host"]), str(row["container_registry_suffix"])
            if "/" in host or not host:
                raise ValueError(f"authority_host {host!r} must be a host name, like login.microsoftonline.com")
            if not suffix.startswith("."):
                raise ValueError(f"container_registry_suffix {suffix!r} must start with a dot, like .azurecr.io")
            out[str(name)] = Cloud(str(name), _https(row["resource_manager"]), host,
                                   _https(row["registry_discovery_endpoint"]), suffix)
    return out


def clouds() -> dict[str, Cloud]:
    """name (AzureCloud, AzureUSGovernment, AzureChinaCloud) -> its endpoints."""
    return load(FILE, _clouds, hint=HINT)


def registry_cloud(hostname: str) -> Cloud | None:
    """The cloud whose container registries a login server belongs to (x.azurecr.us: AzureUSGovernment)."""
    host = hostname.lower()
    return next((c for c in clouds().values() if host.endswith(c.container_registry_suffix)), None)
