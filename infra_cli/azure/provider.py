"""The provider: the only code that calls the Azure SDKs for plan and apply.

Reads are concurrent (bounded) and use list calls where one serves; writes are single resources, with
azure-core's retry policy (set up in clients.py) handling 429/5xx. The same code runs against Azure and
against the local emulator: only clients.py knows which.
"""

from __future__ import annotations

import re
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from infra_cli.azure.errors import azure_error_code, azure_error_message  # noqa: F401  (re-exported)
from infra_cli.azure.quiet import quiet_sdk
from infra_cli.plan.desired import ClusterSecrets
from infra_cli.plan.diff import LiveState
from infra_cli.plan.model import Resource
from infra_cli.plan.normalise import cluster_resource, environment_resource, other_compute_resource
from infra_cli.plan.smoke_pending import SmokeInputs, SmokeRecord

if TYPE_CHECKING:
    from infra_cli.validate.preflight import LiveFacts

MAX_READ_CONCURRENCY = 16
SMOKE_RECORD_IMAGE = "mcr.microsoft.com/azureml/infra-smoke-record:none"  # never pulled: the version is a record


def smoke_record_name(stack: str, distribution: str) -> str:
    """The environment whose versions record a distribution's smoke results (a stack name has no '.')."""
    return f"infra-smoke-{stack}.{re.sub(r'[^A-Za-z0-9_.-]', '-', distribution)}"


def is_not_found(exc: Exception) -> bool:
    """A 404, however the SDK dresses it (azure-ai-ml raises a ValidationException for a missing asset label)."""
    from azure.core.exceptions import ResourceNotFoundError

    if isinstance(exc, ResourceNotFoundError) or getattr(exc, "status_code", None) == 404:
        return True
    return type(exc).__name__ == "ValidationException" and "does not exist" in str(exc)


def _cluster_values(entity: Any) -> dict[str, Any]:
    """Plain values off an AmlCompute entity (field names of CLI v2 YAML)."""
    ssh = getattr(entity, "ssh_settings", None)
    net = getattr(entity, "network_settings", None)
    identity = getattr(entity, "identity", None)
    uais = getattr(identity, "user_assigned_identities", None) or []
    return {
        "name": entity.name,
        "size": entity.size,
        "tier": entity.tier,
        "min_instances": entity.min_instances,
        "max_instances": entity.max_instances,
        "idle_time_before_scale_down": entity.idle_time_before_scale_down,
        "enable_node_public_ip": entity.enable_node_public_ip,
        "ssh_public_access_enabled": entity.ssh_public_access_enabled,
        "ssh_admin_username": getattr(ssh, "admin_username", None),
        "subnet": getattr(net, "subnet", None),
        "identity_type": getattr(identity, "type", None),
        "user_assigned_identities": [getattr(u, "resource_id", None) for u in uais if getattr(u, "resource_id", None)],
        "location": entity.location,
        "tags": dict(entity.tags or {}),
        "description": entity.description,
        # a Failed or stuck cluster plans as a replacement (plan/diff.py)
        "provisioning_state": getattr(entity, "provisioning_state", None),
        "provisioning_errors": getattr(entity, "provisioning_errors", None),
        "created_on": getattr(entity, "created_on", None),
    }


def _compute_resource(entity: Any) -> Resource:
    """An AmlCompute cluster, normalised; a compute of another kind holding the name (a workspace's computes
    share one namespace: AKS, compute instances, ...) as what it is, which plan never adopts or changes.
    azure-ai-ml reads some kinds (AKS) as "*** Unsupported Compute Type ***" without their computeType."""
    compute_type = str(getattr(entity, "type", "") or "")
    if compute_type.lower() != "amlcompute":
        return other_compute_resource(entity.name, compute_type.strip("* ") or "unknown")
    return cluster_resource(_cluster_values(entity))


def _restricts(restriction: Any, location: str) -> bool:
    # the model's `values` field is shadowed by the mapping method of the same name on newer SDKs
    values = restriction.as_dict().get("values") if hasattr(restriction, "as_dict") else restriction["values"]
    return not values or location in [str(v).lower() for v in values]


@dataclass
class Provider:
    clients: Any  # infra_cli.azure.clients.AzureClients

    # ---- reads ------------------------------------------------------------------------------------------

    def refresh(self, desired: list[Resource]) -> LiveState:
        """Live state of every cluster in the workspace (one list call) and of each declared environment."""
        envs = [r for r in desired if r.type == "environment" and r.attributes.get("kind") != "curated"]
        live = LiveState()
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_READ_CONCURRENCY, len(envs) + 1))) as pool:
            clusters_f = pool.submit(self.list_clusters)
            env_fs = {r.name: pool.submit(self.read_environment, r.name, r.attributes.get("version")) for r in envs}
            for res in clusters_f.result():
                live.clusters[res.name] = res
            for name, fut in env_fs.items():
                res = fut.result()
                if res is not None:
                    live.environments[name] = res
        return live

    def list_clusters(self) -> list[Resource]:
        return [_compute_resource(entity) for entity in self.clients.ml.compute.list()]

    def read_cluster(self, name: str) -> Resource | None:
        try:
            return _compute_resource(self.clients.ml.compute.get(name))
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    def read_environment(self, name: str, pinned: str | None) -> Resource | None:
        """The pinned version (if the stack pins one) or the latest, plus the next free version number."""
        envs = self.clients.ml.environments
        try:
            latest = envs.get(name, label="latest")
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        next_version = str(int(latest.version) + 1) if str(latest.version).isdigit() else None
        entity = latest
        if pinned and pinned != latest.version:
            try:
                entity = envs.get(name, version=pinned)
            except Exception as exc:
                if not is_not_found(exc):
                    raise
                return environment_resource(name, None, latest.tags, next_version)
        return environment_resource(name, entity.version, entity.tags, next_version)

    def resolve_environment(self, reference: str) -> str | None:
        """What an environment reference names now, as `azureml://registries/R/environments/N/versions/V` (or
        `azureml:N:V` in the workspace); None when it does not exist. Labels (latest) resolve to a version."""
        from infra_cli.knowledge.curated import parse_environment_reference

        ref = parse_environment_reference(reference)
        envs = self.clients.registry(ref.registry).environments if ref.registry else self.clients.ml.environments
        try:
            entity = envs.get(ref.name, label=ref.label) if ref.label else envs.get(ref.name, version=ref.version)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        if ref.registry:
            return f"azureml://registries/{ref.registry}/environments/{entity.name}/versions/{entity.version}"
        return f"azureml:{entity.name}:{entity.version}"

    def resolve_environments(self, references: dict[str, str]) -> dict[str, str | None]:
        """name -> resolved id (None: not found) for each reference, concurrently."""
        if not references:
            return {}
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_READ_CONCURRENCY, len(references)))) as pool:
            futures = {name: pool.submit(self.resolve_environment, ref) for name, ref in references.items()}
            return {name: f.result() for name, f in futures.items()}

    # ---- smoke records (the last smoke of each distribution, on Azure) ------------------------------------

    def read_smoke_record(self, stack: str, distribution: str) -> SmokeRecord | None:
        try:
            env = self.clients.ml.environments.get(smoke_record_name(stack, distribution), label="latest")
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        tags = env.tags or {}
        if tags.get("infra.stack") != stack or tags.get("infra.smoke.distribution") != distribution:
            return None  # another stack's or distribution's record under a name that sanitised alike
        return SmokeRecord(distribution, tags.get("infra.smoke.result", ""),
                           SmokeInputs.decode(tags.get("infra.smoke.inputs")), tags.get("infra.smoke.job") or None,
                           tags.get("infra.smoke.at") or None, tags.get("infra.smoke.reason") or None)

    def read_smoke_records(self, stack: str, distributions: list[str]) -> dict[str, SmokeRecord | None]:
        if not distributions:
            return {}
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_READ_CONCURRENCY, len(distributions)))) as pool:
            futures = {d: pool.submit(self.read_smoke_record, stack, d) for d in distributions}
            return {d: f.result() for d, f in futures.items()}

    def record_smoke(self, stack: str, record: SmokeRecord, *, attempts: int = 5) -> None:
        """Register the record as the next version (immutable, so two writers never overwrite each other: the
        one that loses the version number reads the latest again and takes the next)."""
        from azure.ai.ml.entities import Environment
        from azure.core.exceptions import HttpResponseError

        name = smoke_record_name(stack, record.distribution)
        tags = {"infra.stack": stack, "infra.smoke.distribution": record.distribution,
                "infra.smoke.result": record.result, "infra.smoke.inputs": record.inputs.encode() if record.inputs else "",
                "infra.smoke.job": record.job or "", "infra.smoke.at": record.at or "",
                "infra.smoke.reason": record.reason or ""}
        envs = self.clients.ml.environments
        for attempt in range(attempts):
            try:
                latest = envs.get(name, label="latest")
                version = int(latest.version) + 1 if str(latest.version).isdigit() else 1
            except Exception as exc:
                if not is_not_found(exc):
                    raise
                version = 1
            try:
                envs.create_or_update(Environment(
                    name=name, version=str(version), image=f"{SMOKE_RECORD_IMAGE}-{uuid.uuid4().hex[:12]}", tags=tags,
                    description=f"infra smoke record of stack {stack}, distribution {record.distribution} "
                                "(do not use in jobs)"))
                return
            except HttpResponseError:
                if attempt == attempts - 1:
                    raise

    def live_facts(self, location: str) -> "LiveFacts":
        """Workspace location, size offers and restrictions, vCPU quota: three reads, concurrently."""
        from infra_cli.validate.preflight import LiveFacts

        with ThreadPoolExecutor(max_workers=3) as pool:
            ws_f = pool.submit(self._workspace_location)
            skus_f = pool.submit(self._live_skus, location)
            quota_f = pool.submit(self._live_quota, location)
            return LiveFacts(location, ws_f.result(), skus_f.result(), quota_f.result())

    def _workspace_location(self) -> str | None:
        try:
            ws = self.clients.ml.workspaces.get(self.clients.workspace_name)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        return (ws.location or "").replace(" ", "").lower() or None

    def _live_skus(self, location: str) -> dict:
        from infra_cli.validate.preflight import LiveSku

        out = {}
        for sku in self.clients.compute.resource_skus.list(filter=f"location eq '{location}'"):
            if sku.resource_type != "virtualMachines":
                continue
            caps = {c.name: c.value for c in (sku.capabilities or [])}
            # a Location restriction takes the whole region away; a Zone one only some zones
            reasons = tuple(r.reason_code or "Restricted" for r in (sku.restrictions or [])
                            if str(r.type).lower().endswith("location") and _restricts(r, location))
            rdma = caps.get("RdmaEnabled")
            out[sku.name.lower()] = LiveSku(sku.name, sku.family or "", int(caps.get("vCPUs", 0) or 0),
                                            None if rdma is None else rdma == "True", reasons)
        return out

    def _live_quota(self, location: str) -> dict:
        from infra_cli.validate.preflight import LiveQuota

        out = {}
        for usage in self.clients.compute.usage.list(location):
            family = usage.name.value if usage.name else None
            if family:
                out[family] = LiveQuota(family, int(usage.current_value or 0), int(usage.limit or 0))
        return out

    # ---- writes -----------------------------------------------------------------------------------------

    def put_cluster(self, resource: Resource, secrets: ClusterSecrets, subnet: str | None,
                    vnet_name: str | None) -> Any:
        """Create, or update in place, through a full PUT (the SDK's begin_update sends a broken subnet)."""
        from azure.ai.ml.entities import (AmlCompute, AmlComputeSshSettings, IdentityConfiguration,
                                          ManagedIdentityConfiguration, NetworkSettings)

        a = resource.attributes
        ssh = None
        if secrets.admin_username:
            ssh = AmlComputeSshSettings(admin_username=secrets.admin_username,
                                        admin_password=secrets.admin_password, ssh_key_value=secrets.ssh_key_value)
        identity = None
        if a["identity_type"]:
            identity = IdentityConfiguration(type=a["identity_type"], user_assigned_identities=[
                ManagedIdentityConfiguration(resource_id=i) for i in a["user_assigned_identities"]] or None)
        entity = AmlCompute(
            name=resource.name, size=a["size"], tier=a["tier"], min_instances=a["min_instances"],
            max_instances=a["max_instances"], idle_time_before_scale_down=a["idle_time_before_scale_down"],
            enable_node_public_ip=a["enable_node_public_ip"],
            ssh_public_access_enabled=a["ssh_public_access_enabled"] if ssh else None,
            ssh_settings=ssh,
            network_settings=NetworkSettings(vnet_name=vnet_name, subnet=subnet) if subnet else None,
            identity=identity, location=a["location"], description=a["description"],
            tags={**a["tags"], **resource.tags},
        )
        return self.clients.ml.compute.begin_create_or_update(entity).result()

    def delete_cluster(self, name: str, *, wait_gone_s: float = 600.0, poll_s: float = 0.5) -> None:
        """Delete and wait until a GET says 404: a same-name recreate that races the delete comes back with
        the OLD size (azure-rest-api-specs #18889)."""
        try:
            self.clients.ml.compute.begin_delete(name).result()
        except Exception as exc:
            if not is_not_found(exc):
                raise
        deadline = time.monotonic() + wait_gone_s
        while self.read_cluster(name) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster {name} still exists {wait_gone_s:.0f}s after its delete finished")
            time.sleep(poll_s)

    def create_environment_version(self, resource: Resource, base_dir: Path, conda_file: str | None,
                                   build_files: Callable[[Path], Path] | None) -> Any:
        """Register a new, immutable version (never rewrite one)."""
        from azure.ai.ml.entities import BuildContext, Environment

        a = resource.attributes
        common = dict(name=resource.name, version=a["version"], description=a.get("description"),
                      tags={**a.get("tags", {}), **resource.tags})
        if a["kind"] == "image":
            env = Environment(image=a["image"], conda_file=str(base_dir / conda_file) if conda_file else None, **common)
            return self.clients.ml.environments.create_or_update(env)
        with tempfile.TemporaryDirectory(prefix="infra-build-") as tmp, quiet_sdk():  # uploads the context
            context = build_files(Path(tmp)) if build_files else base_dir
            # a user's context may name its Dockerfile otherwise (build.dockerfile_path); a template's is "Dockerfile"
            dockerfile = (a.get("build") or {}).get("dockerfile_path") or "Dockerfile"
            env = Environment(build=BuildContext(path=str(context), dockerfile_path=dockerfile), **common)
            return self.clients.ml.environments.create_or_update(env)
