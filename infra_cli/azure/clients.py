"""Azure SDK clients for a workspace, for Azure's clouds or for an HTTPS endpoint on this machine.

Which one a command talks to is chosen by the composition root (commands/backend.py), which also starts or finds
the local emulator: this module knows nothing of it. For a local endpoint (`EmulatorTarget`: URL, certificate,
bearer token) the same real MLClient and ComputeManagementClient are pointed at it over HTTPS; nothing in the
engines knows which they got.

Retries: azure-core's RetryPolicy counts retries per kind (connect, read, status) besides the total, and the
per-kind counts default to 3, so `retry_total` alone leaves throttled or failing requests at 3 retries. All
four are set here. A Retry-After is honoured up to a cap per wait, and each request with its retries is bounded
in time (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).

Clouds: the workspace's `cloud` (AzureCloud, AzureUSGovernment, AzureChinaCloud) picks, from the SDKs' cloud
metadata (validators/clouds.yaml, knowledge/clouds.py), the ARM endpoint every client talks to, the token scope
each asks for (`{endpoint}/.default`, as MLClient asks it), the authority DefaultAzureCredential signs in at, and
the registry discovery endpoint; MLClient gets the cloud's name and reads its own copy of the same metadata.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra_cli.azure.url import workspace_path
from infra_cli.conventions import EMULATOR_CLOUD_PREFIX
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.clouds import Cloud, clouds
from infra_cli.private_state import write_private_file

if TYPE_CHECKING:
    from azure.ai.ml import MLClient
    from azure.mgmt.compute import ComputeManagementClient

    from infra_cli.azure.arm import ArmClient
    from infra_cli.azure.environment_versions import EnvironmentVersions
    from infra_cli.stack.model import Workspace

# Azure: back off 0.8 s, 1.6 s, ... (azure-core's default). Local: the emulator answers at once.
_BACKOFF_S = {"azure": 0.8, "local": 0.05}
_POLLING_S = {"azure": 10.0, "local": 0.1}     # LRO polling when the service sends no Retry-After (SDK: 30 s)
DEFAULT_RETRY_TOTAL = 10
# The longest single wait a Retry-After may ask for, and the longest one request may take with its retries.
_RETRY_AFTER_MAX_S = {"azure": 60.0, "local": 5.0}
_REQUEST_DEADLINE_S = {"azure": 900, "local": 120}
_LRO_DEADLINE_S = {"azure": 3600.0, "local": 600.0}   # one long-running write (a cluster's create or delete)
_ML_API_VERSION = "2024-04-01"



class AzureClients:
    """What the engines talk to Azure with: `arm`, the lean REST client (azure-core only) plan reads live state and
    apply writes clusters and environment versions with (`versions`), and the SDK clients smoke jobs, registries
    and build contexts go through (`ml`: azure-ai-ml's MLClient, `compute`: azure-mgmt-compute), made on first
    use: importing azure-ai-ml costs more than a command's requests."""

    def __init__(self, arm: "ArmClient", subscription_id: str, resource_group: str, workspace_name: str,
                 location: str, *, registry_discovery_url: str, sdk_options: dict[str, Any], retry_total: int,
                 mode: str, before_sdk: Any = None):
        self.arm = arm
        self.subscription_id, self.resource_group = subscription_id, resource_group
        self.workspace_name, self.location = workspace_name, location
        self.registry_discovery_url = registry_discovery_url
        self._sdk_options, self._retry_total, self._mode = sdk_options, retry_total, mode
        self._before_sdk = before_sdk  # local: trust the emulator's certificate for azure-ai-ml's blob clients
        self._lock = threading.Lock()
        self._ml: "MLClient | None" = None
        self._compute: "ComputeManagementClient | None" = None
        self._registries: dict[str, "MLClient"] = {}

    @property
    def workspace_path(self) -> str:
        """The workspace's ARM id, without the leading slash."""
        return workspace_path(self.subscription_id, self.resource_group, self.workspace_name)

    @property
    def versions(self) -> "EnvironmentVersions":
        """The workspace's environment versions over `arm` (infra's lock, serial and records live there)."""
        from infra_cli.azure.environment_versions import EnvironmentVersions

        return EnvironmentVersions(self.arm, self.workspace_path)

    def __repr__(self) -> str:  # never the credential
        return f"AzureClients({self.subscription_id}/{self.resource_group}/{self.workspace_name}, {self._mode})"

    def _sdk_kwargs(self) -> dict[str, Any]:
        if self._before_sdk is not None:
            self._before_sdk()
        return {"retry_policy": retry_policy(self._retry_total, self._mode), "polling_interval": _POLLING_S[self._mode]}

    @property
    def ml(self) -> "MLClient":
        with self._lock:
            if self._ml is None:
                from azure.ai.ml import MLClient

                options = dict(self._sdk_options)
                options.pop("base_url", None)
                credential = options.pop("credential")
                self._ml = MLClient(credential, self.subscription_id, self.resource_group, self.workspace_name,
                                    show_progress=False, enable_telemetry=False, **self._sdk_kwargs(), **options)
            return self._ml

    @property
    def compute(self) -> "ComputeManagementClient":
        with self._lock:
            if self._compute is None:
                from azure.mgmt.compute import ComputeManagementClient

                kwargs: dict[str, Any] = {**self._sdk_kwargs(), **{k: self._sdk_options[k] for k in ("connection_verify", "base_url")
                                                    if k in self._sdk_options},
                          # the scope infra's other clients ask (azure-mgmt-core's own differs in US Government)
                          "credential_scopes": [self.arm.scope]}
                self._compute = ComputeManagementClient(self._sdk_options["credential"], self.subscription_id, **kwargs)
            return self._compute

    def registry(self, name: str) -> "MLClient":
        """An MLClient for an Azure ML registry (curated environments live in `azureml`). Making one asks the
        cloud's registry discovery endpoint where the registry lives, so it is made once, on first use."""
        from azure.ai.ml import MLClient

        with self._lock:
            client = self._registries.get(name.lower())
            if client is None:
                options = {k: v for k, v in self._sdk_options.items() if k != "base_url"}
                client = MLClient(options.pop("credential"), registry_name=name, show_progress=False,
                                  enable_telemetry=False, **self._sdk_kwargs(), **options)
                self._registries[name.lower()] = client
        return client


def azure_clients(workspace: "Workspace", *, retry_total: int = DEFAULT_RETRY_TOTAL,
                  credential: Any = None) -> AzureClients:
    """SDK clients for the stack's workspace in its cloud. `credential`: a TokenCredential to use instead of
    DefaultAzureCredential."""
    cloud = workspace_cloud(workspace)
    if credential is None:
        from infra_cli.azure import credentials

        credential = credentials.azure_credential(cloud.authority_host)
    # MLClient knows these clouds by name (its own metadata gives its endpoints and scopes); the other clients
    # get the endpoint and scope from clouds.yaml, which a test holds equal to that metadata.
    return _clients(workspace, {"credential": credential, "cloud": cloud.name, "base_url": cloud.resource_manager},
                    cloud, retry_total, "azure")


def local_clients(workspace: "Workspace", target: "EmulatorTarget", *,
                  retry_total: int = DEFAULT_RETRY_TOTAL) -> AzureClients:
    """SDK clients for the stack's workspace on a local endpoint, which stands in for whichever cloud the
    workspace names."""
    return _clients(workspace, target.options(), workspace_cloud(workspace), retry_total, "local",
                    before_sdk=lambda: trust_emulator_certificate(target.cert_path))


def workspace_cloud(workspace: "Workspace") -> Cloud:
    """The endpoints of the workspace's cloud (validators/clouds.yaml)."""
    known = clouds()
    found = known.get(workspace.cloud) or next((c for n, c in known.items() if n.lower() == workspace.cloud.lower()),
                                               None)
    if found is None:
        raise DiagnosticError([Diagnostic(
            "error", "workspace.unknown-cloud", f"cloud {workspace.cloud!r} has no endpoints in validators/clouds.yaml",
            None, None, None, f"use one of {', '.join(known)}, or add its endpoints to validators/clouds.yaml")])
    return found


@dataclass(frozen=True)
class EmulatorTarget:
    """Where the SDKs reach an emulator: its URL, certificate and bearer token."""

    url: str
    port: int
    cert_path: Path
    token: str

    def options(self) -> dict[str, Any]:
        from infra_cli.azure.credentials import LocalCredential

        url = self.url
        return {
            "credential": LocalCredential(self.token),
            # A cloud name per URL: azure-ai-ml refuses to redefine a cloud name within a process.
            "cloud": f"{EMULATOR_CLOUD_PREFIX}{self.port}",
            "cloud_metadata": {"resource_manager": url, "azure_portal": url, "active_directory": url,
                               "aml_resource_id": url, "storage_endpoint": "core.windows.net",
                               "registry_discovery_endpoint": url},
            "base_url": url,
            "connection_verify": str(self.cert_path),
        }

    def ensure_workspace(self, workspace: "Workspace", retry_total: int) -> None:
        """The stack's workspace on a served emulator: read it, create it only if absent (no write otherwise)."""
        from azure.core import PipelineClient
        from azure.core.exceptions import HttpResponseError
        from azure.core.rest import HttpRequest, HttpResponse

        from infra_cli.azure.loopback import LoopbackTransport  # a served emulator is loopback: no requests import

        path = workspace_path(workspace.subscription_id, workspace.resource_group, workspace.name)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        params = {"api-version": _ML_API_VERSION}
        pipeline: PipelineClient[HttpRequest, HttpResponse] = PipelineClient(
            self.url, policies=[retry_policy(retry_total, "local")],
            transport=LoopbackTransport(connection_verify=str(self.cert_path)))
        with pipeline as client:
            found = client.send_request(HttpRequest("GET", self.url + path, params=params, headers=headers))
            if found.status_code == 404:
                found = client.send_request(HttpRequest("PUT", self.url + path, params=params, headers=headers,
                                                        json={"location": workspace.location}))
            if found.status_code >= 400:
                raise HttpResponseError(response=found)


def trust_emulator_certificate(cert_path: Path) -> None:
    """Make requests trust the emulator's certificate as well as the usual CAs.

    azure-ai-ml builds its blob clients (code upload, job downloads) without our connection_verify, so
    they read REQUESTS_CA_BUNDLE: point it at a bundle of the current CAs plus the emulator's certificate."""
    bundle = cert_path.with_name("ca-bundle.pem")
    current = os.environ.get("REQUESTS_CA_BUNDLE")
    if current and Path(current) == bundle:
        return
    import certifi

    base = Path(current) if current and Path(current).is_file() else Path(certifi.where())
    # replaced whole, never written through a link planted in the state directory
    write_private_file(bundle, base.read_bytes().rstrip(b"\n") + b"\n" + cert_path.read_bytes(), 0o644)
    os.environ["REQUESTS_CA_BUNDLE"] = str(bundle)


def retry_policy(retry_total: int, mode: str) -> Any:
    """azure-core's RetryPolicy with every per-kind count at retry_total, Retry-After honoured up to a cap,
    and a deadline for one request with its retries."""
    from azure.core.pipeline.policies import RetryPolicy

    class BoundedRetryPolicy(RetryPolicy):
        def get_retry_after(self, response):  # a Retry-After of an hour would otherwise be slept in full
            wait = super().get_retry_after(response)
            return None if wait is None else min(wait, _RETRY_AFTER_MAX_S[mode])

    # 408/429/5xx are retried with exponential backoff; a Retry-After header sets the wait instead.
    return BoundedRetryPolicy(retry_total=retry_total, retry_connect=retry_total, retry_read=retry_total,
                              retry_status=retry_total, retry_backoff_factor=_BACKOFF_S[mode], retry_backoff_max=30,
                              retry_mode="exponential", timeout=_REQUEST_DEADLINE_S[mode])


def _clients(workspace: "Workspace", options: dict[str, Any], cloud: Cloud, retry_total: int, mode: str,
             before_sdk: Any = None) -> AzureClients:
    """The emulator's options carry its own cloud metadata (every endpoint its URL); Azure's are the cloud's."""
    from infra_cli.azure.arm import ArmClient

    metadata = options.get("cloud_metadata") or {}
    arm = ArmClient(options["base_url"], options["credential"], retry_policy(retry_total, mode),
                    scope=cloud.arm_scope, connection_verify=options.get("connection_verify", True),
                    polling_s=_POLLING_S[mode], lro_deadline_s=_LRO_DEADLINE_S[mode])
    return AzureClients(arm, workspace.subscription_id, workspace.resource_group, workspace.name, workspace.location,
                        registry_discovery_url=metadata.get("registry_discovery_endpoint")
                        or cloud.registry_discovery_endpoint,
                        sdk_options=options, retry_total=retry_total, mode=mode, before_sdk=before_sdk)
