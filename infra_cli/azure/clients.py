"""The ONE place that builds Azure SDK clients, for Azure or for the local emulator (`--local`).

Local mode does not swap in a fake provider: it starts (or reuses, within this process) the emulator over
the local state directory, makes sure the stack's workspace exists there, and points the same real
MLClient and ComputeManagementClient at it over HTTPS. Nothing else in the engine knows which it got.
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra_cli.paths import local_state_dir

if TYPE_CHECKING:
    from azure.ai.ml import MLClient
    from azure.mgmt.compute import ComputeManagementClient

    from infra_cli.emulator.server import EmulatorServer
    from infra_cli.stack.model import Workspace

AZURE_CLOUD = "AzureCloud"
# Azure: back off 0.8 s, 1.6 s, ... (azure-core's default). Local: the emulator answers at once.
_BACKOFF_S = {"azure": 0.8, "local": 0.05}
_POLLING_S = {"azure": 10.0, "local": 0.1}     # LRO polling when the service sends no Retry-After (SDK: 30 s)
DEFAULT_RETRY_TOTAL = 10
# Seconds a compute create/update/delete takes in the in-process emulator (default 2; CLI tests set it low).
PROVISIONING_DELAY_ENV = "INFRA_EMULATOR_PROVISIONING_DELAY_S"

_emulators: dict[Path, "EmulatorServer"] = {}
_emulators_lock = threading.Lock()


@dataclass
class AzureClients:
    ml: "MLClient"
    compute: "ComputeManagementClient"
    subscription_id: str
    resource_group: str
    workspace_name: str
    location: str


def build_clients(workspace: "Workspace", *, local: bool, local_dir: Path | None = None,
                  retry_total: int = DEFAULT_RETRY_TOTAL, emulator: "EmulatorServer | None" = None) -> AzureClients:
    """SDK clients for the stack's workspace. local=True: the emulator (`emulator`, or the one this process
    runs over local_dir, default ./.infra/local or INFRA_LOCAL_DIR, started on first use)."""
    forget_inherited_emulator_cloud()
    if local:
        server = emulator or local_emulator(local_dir)
        server.ensure_workspace(workspace.subscription_id, workspace.resource_group, workspace.name,
                                workspace.location)
        return _clients(workspace, _local_options(server), retry_total, "local")
    from infra_cli.azure.credentials import azure_credential

    return _clients(workspace, {"credential": azure_credential(), "cloud": AZURE_CLOUD}, retry_total, "azure")


EMULATOR_CLOUD_PREFIX = "InfraLocalEmulator"


def forget_inherited_emulator_cloud() -> None:
    """MLClient records its cloud in AZUREML_CURRENT_CLOUD, and azure.ai.ml reads it at import time. One naming
    another process's emulator cloud (inherited by a child process) makes that import fail with "Unknown cloud
    environment"; such a name means nothing outside the process that registered it, so drop it first."""
    if os.environ.get("AZUREML_CURRENT_CLOUD", "").startswith(EMULATOR_CLOUD_PREFIX):
        del os.environ["AZUREML_CURRENT_CLOUD"]


def local_emulator(local_dir: Path | None = None) -> "EmulatorServer":
    """The emulator this process runs over local_dir, started on an ephemeral port on first use."""
    from infra_cli.emulator.faults import FaultConfig
    from infra_cli.emulator.server import EmulatorServer

    state_dir = Path(local_dir or local_state_dir()).resolve()
    with _emulators_lock:
        server = _emulators.get(state_dir)
        if server is None or not server.running:
            delay = os.environ.get(PROVISIONING_DELAY_ENV)
            faults = FaultConfig() if not delay else FaultConfig(provisioning_delay_s=float(delay))
            server = EmulatorServer(state_dir, faults=faults).start()
            _emulators[state_dir] = server
            atexit.register(server.stop)
    return server


def _local_options(server: "EmulatorServer") -> dict[str, Any]:
    from infra_cli.azure.credentials import LocalCredential

    url = server.url
    trust_emulator_certificate(server.cert_path)
    return {
        "credential": LocalCredential(server.token),
        # A cloud name per URL: azure-ai-ml refuses to redefine a cloud name within a process.
        "cloud": f"{EMULATOR_CLOUD_PREFIX}{server.port}",
        "cloud_metadata": {"resource_manager": url, "azure_portal": url, "active_directory": url,
                           "aml_resource_id": url, "storage_endpoint": "core.windows.net",
                           "registry_discovery_endpoint": url},
        "base_url": url,
        "connection_verify": str(server.cert_path),
    }


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
    bundle.write_bytes(base.read_bytes().rstrip(b"\n") + b"\n" + cert_path.read_bytes())
    os.environ["REQUESTS_CA_BUNDLE"] = str(bundle)


def _clients(workspace: "Workspace", options: dict[str, Any], retry_total: int, mode: str) -> AzureClients:
    from azure.ai.ml import MLClient
    from azure.core.pipeline.policies import RetryPolicy
    from azure.mgmt.compute import ComputeManagementClient

    def retry_policy() -> RetryPolicy:
        # 408/429/5xx are retried with exponential backoff; a Retry-After header sets the wait instead.
        return RetryPolicy(retry_total=retry_total, retry_backoff_factor=_BACKOFF_S[mode], retry_backoff_max=30,
                           retry_mode="exponential")

    credential = options.pop("credential")
    base_url = options.pop("base_url", None)
    connection = {k: options[k] for k in ("connection_verify",) if k in options}
    ml = MLClient(credential, workspace.subscription_id, workspace.resource_group, workspace.name,
                  retry_policy=retry_policy(), polling_interval=_POLLING_S[mode], show_progress=False,
                  enable_telemetry=False, **options)
    compute_kwargs: dict[str, Any] = {"retry_policy": retry_policy(), "polling_interval": _POLLING_S[mode], **connection}
    if base_url:
        compute_kwargs["base_url"] = base_url
    compute = ComputeManagementClient(credential, workspace.subscription_id, **compute_kwargs)
    return AzureClients(ml=ml, compute=compute, subscription_id=workspace.subscription_id,
                        resource_group=workspace.resource_group, workspace_name=workspace.name,
                        location=workspace.location)
