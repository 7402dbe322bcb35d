"""The provider: the only code that calls Azure for plan and apply.

Reads go over the lean REST client (azure/arm.py: azure-core only, no azure-ai-ml import), with list calls where
one serves, issued concurrently (bounded); they return plain data (dicts of the values azure-ai-ml's entities
would hold, translated by azure/compute_codec.py and azure/environment_codec.py), which plan normalises
(plan/kinds/, each kind its own), so this module needs nothing from plan. Writes of clusters and environment versions go over the same
client, as the requests azure-ai-ml sends (compute_codec.compute_body; tests/contract hold them equal to its
serialisation); only an environment with a build context (uploaded to the workspace's storage)
goes through azure-ai-ml itself. azure-core's retry policy (clients.py) handles 429/5xx for both. The same
code runs against Azure and against the local emulator: only the command's backend (commands/backend.py) knows which.
"""

from __future__ import annotations

import re
import tempfile
import time
import uuid
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from infra_cli.conventions import OWNERSHIP_TAGS, TAG_STACK
from infra_cli.azure.compute_codec import compute_body, compute_values
from infra_cli.azure.environment_codec import conda_text, version_values
from infra_cli.azure.errors import is_forbidden, is_not_found
from infra_cli.azure.environment_versions import API_ENVIRONMENTS, version_tags
from infra_cli.azure.jobs import cancel_job, download_job, job_logs, job_status, submit_job
from infra_cli.azure.kinds import AZURE_KINDS
from infra_cli.azure.lock_store import archive_versions, latest_lock_version, register_lock_version
from infra_cli.azure.protocol import Written, read_pool
from infra_cli.azure.sdk_chatter import quiet_sdk
from infra_cli.azure.url import segment
from infra_cli.knowledge.curated import CURATED_REGISTRY, parse_environment_reference, registry_name_forms
from infra_cli.stack.environment import is_remote_context
from infra_cli.stack.secret import revealed

MAX_READ_CONCURRENCY = 32   # one round of single reads for a stack of 60 resources, each waiting on the network
# A list this process was busy for, at least BUSY_SHARE of the time it took, was answered by this process (the
# in-process emulator), not waited for: its reads are work for the same cores, and threads past a few contend for
# them (100 environment versions read in 0.17 s on 4 threads, 0.22 s on 32; bench/bench_plan.py).
BUSY_SHARE = 0.5
BUSY_READ_CONCURRENCY = 4
SMOKE_RECORD_IMAGE = "mcr.microsoft.com/azureml/infra-smoke-record:none"  # never pulled: the version is a record

# The api-versions azure-ai-ml 1.35 and azure-mgmt-compute 39 send for the same reads, so a read here and
# through the SDKs are the same request (and the emulator, held to the same specs, answers both alike).
API_WORKSPACE = "2024-10-01-preview"
API_COMPUTES = "2023-08-01-preview"
API_REGISTRY_DISCOVERY = "v1.0"
API_REGISTRY_ASSETS = "2021-10-01-dataplanepreview"
API_SKUS = "2021-07-01"
API_USAGES = "2023-08-01-preview"   # azure-ai-ml's compute.list_usage
MFE_PATH_PREFIX = "mferp/managementfrontend"


def smoke_record_name(stack: str, distribution: str) -> str:
    """The environment whose versions record a distribution's smoke results (a stack name has no '.')."""
    return f"infra-smoke-{stack}.{re.sub(r'[^A-Za-z0-9_.-]', '-', distribution)}"


def _restricts(restriction: dict, location: str) -> bool:
    values = restriction.get("values")
    return not values or location in [str(v).lower() for v in values]


def sku_offer(sku: dict, location: str) -> dict[str, Any]:
    """A resource SKU -> name, family, vcpus, rdma_enabled (None: not reported), restrictions (the reason codes of
    Location restrictions here: a Zone one takes only some zones away)."""
    caps = {c.get("name"): c.get("value") for c in (sku.get("capabilities") or [])}
    reasons = tuple(r.get("reasonCode") or "Restricted" for r in (sku.get("restrictions") or [])
                    if str(r.get("type")).lower().endswith("location") and _restricts(r, location))
    rdma = caps.get("RdmaEnabled")
    return {"name": sku.get("name"), "family": sku.get("family") or "", "vcpus": int(caps.get("vCPUs", 0) or 0),
            "rdma_enabled": None if rdma is None else rdma == "True", "restrictions": reasons}


def _pool(n: int) -> Any:
    return read_pool(min(MAX_READ_CONCURRENCY, n))


@dataclass
class AzureProvider:
    """The Provider (azure/protocol.py) over azure-core's reader and the SDK clients. `clients` is its own: no
    engine reaches them (each read and write is a method here)."""

    clients: Any  # infra_cli.azure.clients.AzureClients

    smoke_record_name = staticmethod(smoke_record_name)

    @property
    def _workspace_path(self) -> str:
        return self.clients.workspace_path

    # ---- reads: plain data, one list call where one serves ------------------------------------------------

    def list_computes(self) -> list[dict[str, Any]]:
        """Every compute of the workspace (compute_values), paged."""
        return [compute_values(b) for b in self.clients.arm.list(f"{self._workspace_path}/computes", API_COMPUTES)]

    def read_compute(self, name: str) -> dict[str, Any] | None:
        body = self.clients.arm.get(f"{self._workspace_path}/computes/{segment(name)}", API_COMPUTES)
        return None if body is None else compute_values(body)

    def listed_environments(self) -> Iterator[tuple[str, str | None]]:
        """The workspace's environments (containers) as the list's pages arrive: (lower-case name, the latest
        version as the list carries it: AssetContainer.latestVersion, None where it is not there)."""
        for body in self.clients.arm.pages(f"{self._workspace_path}/environments", API_ENVIRONMENTS):
            version = (body.get("properties") or {}).get("latestVersion") if isinstance(body, dict) else None
            yield str(body.get("name")).lower(), version if isinstance(version, str) and version else None

    def read_environment(self, name: str, pinned: str | None) -> dict[str, Any] | None:
        """The pinned version (if the stack pins one) or the latest (as azure-ai-ml asks for label latest: the
        newest created, `$orderBy=createdtime desc&$top=1`), plus the next free version number; None when the
        environment has no version."""
        versions = f"{self._workspace_path}/environments/{segment(name)}/versions"
        latest = self.clients.arm.first(versions, API_ENVIRONMENTS, **{"$orderBy": "createdtime desc", "$top": 1})
        if latest is None:
            # every version archived (a destroyed stack's, archive_environment): none is live, and the next
            # version must pass the archived numbers (versions are immutable, archived ones too)
            archived = self.clients.arm.first(versions, API_ENVIRONMENTS, listViewType="All",
                                              **{"$orderBy": "createdtime desc", "$top": 1})
            if archived is None:
                return None
            number = version_values(archived)["version"]
            return {"name": name, "version": None, "tags": {},
                    "next_version": str(int(number) + 1) if str(number).isdigit() else None}
        latest_version = version_values(latest)["version"]
        next_version = str(int(latest_version) + 1) if str(latest_version).isdigit() else None
        if pinned and pinned != latest_version:
            body = self.clients.arm.get(f"{versions}/{segment(pinned)}", API_ENVIRONMENTS)
            if body is None:
                return {"name": name, "version": None, "tags": dict((latest.get("properties") or {}).get("tags")
                                                                    or {}), "next_version": next_version}
            return version_values(body, next_version)
        return version_values(latest, next_version)

    def read_listed_environment(self, name: str, pinned: str | None, latest: str | None) -> dict[str, Any] | None:
        """read_environment, where the container list named the latest version: one GET of the version the stack
        pins, or of the latest, for what no list carries (its tags). The latest archived, a pin that is not
        there, or no latest named: read_environment's own reads decide."""
        if latest is None:
            return self.read_environment(name, pinned)
        version = f"{self._workspace_path}/environments/{segment(name)}/versions/{segment(pinned or latest)}"
        body = self.clients.arm.get(version, API_ENVIRONMENTS)
        if body is None or (body.get("properties") or {}).get("isArchived"):
            return self.read_environment(name, pinned)
        return version_values(body, str(int(latest) + 1) if latest.isdigit() else None)

    def read_environments(self, wanted: dict[str, str | None]) -> dict[str, dict[str, Any] | None]:
        """name -> read_environment(name, pinned) for each wanted one. One list of the workspace's environments
        says which exist and their latest version; the version of each that exists is then read, concurrently
        (a version's tags are in no list: Azure lists versions per environment only)."""
        if not wanted:
            return {}
        by_lower: dict[str, list[str]] = {}
        for n in wanted:
            by_lower.setdefault(n.lower(), []).append(n)
        futures: dict[str, Future] = {}
        wall, cpu = time.perf_counter(), time.process_time()
        with ExitStack() as opened:
            pool = None
            # each page's versions are read while the next page is fetched; the pool's size is chosen by what the
            # first page cost this process (BUSY_SHARE), and never passes the number of reads
            for lower, version in self.listed_environments():
                if pool is None:
                    busy = time.process_time() - cpu >= BUSY_SHARE * (time.perf_counter() - wall)
                    pool = opened.enter_context(_pool(min(len(wanted), BUSY_READ_CONCURRENCY) if busy else len(wanted)))
                for n in by_lower.get(lower, ()):   # a name listed twice: its last listing is read
                    futures[n] = pool.submit(self.read_listed_environment, n, wanted[n], version)
            return {n: futures[n].result() if n in futures else None for n in wanted}

    def _registry_base(self, registry: str) -> tuple[str, str, str]:
        """(MFE base URL, subscription, resource group) of a registry, from the cloud's registry discovery."""
        arm = self.clients.arm
        found = arm.get(f"{self.clients.registry_discovery_url.rstrip('/')}/registrymanagement/v1.0/registries/"
                        f"{segment(registry)}/discovery", API_REGISTRY_DISCOVERY)
        if found is None:
            return "", "", ""
        base = str(found.get("primaryRegionResourceProviderUri") or "")
        return (base if base.endswith("/") else base + "/") + MFE_PATH_PREFIX, found.get("subscriptionId"), \
            found.get("resourceGroup")

    def _version_lists(self, reference: str, registry_base: tuple[str, str, str] | None = None
                       ) -> tuple[list[str], str]:
        """The version lists an environment reference may name (a registry's in each form of its name, or the
        workspace's), with their api-version; none for a registry that discovery does not know."""
        ref = parse_environment_reference(reference)
        if ref.registry:
            base, sub, group = registry_base or self._registry_base(ref.registry)
            if not base:
                return [], API_REGISTRY_ASSETS
            registry = (f"{base}/subscriptions/{segment(sub)}/resourceGroups/{segment(group)}/providers/"
                        f"Microsoft.MachineLearningServices/registries/{segment(ref.registry)}/environments")
            # a curated name as public samples write it (AzureML-acpt-...) is the registry's acpt-... too
            forms = registry_name_forms(ref.name) if ref.registry.lower() == CURATED_REGISTRY else (ref.name,)
            return [f"{registry}/{segment(form)}/versions" for form in forms], API_REGISTRY_ASSETS
        return [f"{self._workspace_path}/environments/{segment(ref.name)}/versions"], API_ENVIRONMENTS

    def environment_versions(self, reference: str) -> list[str]:
        """The versions the registry (or the workspace) lists of the environment `reference` names, newest first
        (label latest is the first): what a reference to a version that does not exist is told to pin instead.
        [] when the name itself is not there."""
        candidates, api = self._version_lists(reference)
        for versions in candidates:
            try:
                found = [str(version_values(b)["version"]) for b in
                         self.clients.arm.pages(versions, api, **{"$orderBy": "createdtime desc"})
                         if isinstance(b, dict)]
            except Exception as exc:
                if not is_not_found(exc):
                    raise
                continue
            if found:
                return found
        return []

    def resolve_environment(self, reference: str, registry_base: tuple[str, str, str] | None = None) -> str | None:
        """What an environment reference names now, as `azureml://registries/R/environments/N/versions/V` (or
        `azureml:N:V` in the workspace); None when it does not exist. Labels (latest) resolve to a version."""
        ref = parse_environment_reference(reference)
        arm = self.clients.arm
        candidates, api = self._version_lists(reference, registry_base)
        body = None
        for versions in candidates:
            body = (arm.first(versions, api, **{"$orderBy": "createdtime desc", "$top": 1}) if ref.label
                    else arm.get(f"{versions}/{segment(ref.version)}", api))
            if body is not None:
                break
        if body is None:
            return None
        entity = version_values(body)
        if ref.registry:
            return f"azureml://registries/{ref.registry}/environments/{entity['name']}/versions/{entity['version']}"
        return f"azureml:{entity['name']}:{entity['version']}"

    def environment_names(self, registry: str | None) -> list[str]:
        """The names of a registry's environments (its containers), or of the workspace's with None: what a
        reference that names nothing is compared against for a did-you-mean."""
        if registry is None:
            return [name for name, _ in self.listed_environments()]
        base, sub, group = self._registry_base(registry)
        if not base:
            return []
        listing = (f"{base}/subscriptions/{segment(sub)}/resourceGroups/{segment(group)}/providers/"
                   f"Microsoft.MachineLearningServices/registries/{segment(registry)}/environments")
        return [str(b.get("name")) for b in self.clients.arm.pages(listing, API_REGISTRY_ASSETS)
                if isinstance(b, dict) and b.get("name")]

    def resolve_environments(self, references: dict[str, str]) -> dict[str, str | None]:
        """name -> resolved id (None: not found) for each reference, concurrently; each registry is discovered
        once."""
        if not references:
            return {}
        registries = {r for r in (parse_environment_reference(v).registry for v in references.values()) if r}
        with _pool(len(references) + len(registries)) as pool:
            bases = {r: pool.submit(self._registry_base, r) for r in registries}
            futures = {name: pool.submit(lambda ref: self.resolve_environment(
                ref, (lambda reg: bases[reg].result() if reg else None)(parse_environment_reference(ref).registry)),
                ref) for name, ref in references.items()}
            return {name: f.result() for name, f in futures.items()}

    def read_workspace(self) -> dict[str, Any] | None:
        """The workspace's facts plan judges by, None when it does not exist: `location` (as `eastus`) and
        `isolation_mode`, its managed virtual network's (properties.managedNetwork.isolationMode of workspaceRP.json:
        Disabled, AllowInternetOutbound, AllowOnlyApprovedOutbound; Disabled when Azure sends none)."""
        ws = self.clients.arm.get(self._workspace_path, API_WORKSPACE)
        if ws is None:
            return None
        network = (ws.get("properties") or {}).get("managedNetwork") or {}
        return {"location": (ws.get("location") or "").replace(" ", "").lower() or None,
                "isolation_mode": str(network.get("isolationMode") or "Disabled")}

    def workspace_location(self) -> str | None:
        """The workspace's region (as `eastus`), None when the workspace does not exist."""
        ws = self.read_workspace()
        return None if ws is None else ws["location"]

    def _subscription_list(self, path: str, api_version: str, **query: Any) -> list[dict] | None:
        """A subscription-scope list, None when this identity may not read it (403): an identity with a role on
        the workspace only can still plan, without the region's facts."""
        try:
            return self.clients.arm.list(f"subscriptions/{segment(self.clients.subscription_id)}/providers/{path}",
                                         api_version, **query)
        except Exception as exc:
            if is_forbidden(exc):
                return None
            raise

    def sku_offers(self, location: str) -> dict[str, dict[str, Any]] | None:
        """lower-case size -> sku_offer, for the virtual machine sizes of a region (one paged list); None: not
        readable by this identity."""
        skus = self._subscription_list("Microsoft.Compute/skus", API_SKUS, **{"$filter": f"location eq '{location}'"})
        return None if skus is None else {str(s["name"]).lower(): sku_offer(s, location) for s in skus
                                          if s.get("resourceType") == "virtualMachines" and s.get("name")}

    def usages(self, location: str) -> list[dict[str, Any]] | None:
        """Azure ML's vCPU usage and quota in a region, which AmlCompute draws on (not Microsoft.Compute's VM
        quota): [{id, type, name, current, limit}], one paged list; None: not readable by this identity."""
        usages = self._subscription_list(f"Microsoft.MachineLearningServices/locations/{segment(location)}/usages",
                                         API_USAGES)
        if usages is None:
            return None
        out = []
        for usage in usages:
            name = (usage.get("name") or {}).get("value")
            if name:
                limit = usage.get("limit")
                out.append({"id": usage.get("id"), "type": usage.get("type"), "name": name,
                            "current": int(usage.get("currentValue") or 0),
                            "limit": -1 if limit is None else int(limit)})
        return out

    # ---- infra's records: the lock and the serial (state/), as numbered environment versions ---------------

    def latest_record(self, name: str) -> tuple[int, dict[str, str]] | None:
        return latest_lock_version(self.clients.versions, name)

    def register_record(self, name: str, version: int, tags: dict[str, str], *,
                        description: str = "infra stack lock (do not use in jobs)") -> None:
        register_lock_version(self.clients.versions, name, version, tags, description=description)

    # ---- jobs (smoke/run.py's), through azure-ai-ml ----------------------------------------------------------

    @contextmanager
    def _jobs(self) -> Iterator[Any]:
        """azure-ai-ml's MLClient, quieted: built first, as its import sets its loggers to INFO, which quiet_sdk
        lowers on entering."""
        ml = self.clients.ml
        with quiet_sdk():
            yield ml

    def submit_job(self, spec: Any, code_dir: Path) -> str:
        with self._jobs() as ml:
            return submit_job(ml, spec, code_dir)

    def job_status(self, job_name: str) -> str:
        with self._jobs() as ml:
            return job_status(ml, job_name)

    def cancel_job(self, job_name: str) -> None:
        with self._jobs() as ml:
            cancel_job(ml, job_name)

    def download_job(self, job_name: str, into: Path, **bounds: int) -> list[str]:
        with self._jobs() as ml:
            return download_job(ml, job_name, into, **bounds)

    def job_logs(self, job_name: str) -> dict[str, str]:
        with self._jobs() as ml:
            return job_logs(ml, job_name)

    # ---- smoke records (the last smoke of each distribution, on Azure) ------------------------------------

    def record_smoke(self, stack: str, distribution: str, tags: dict[str, str], *, attempts: int = 5) -> None:
        """Register the record (its tags) as the next version (immutable, so two writers never overwrite each
        other: the one that loses the version number reads the latest again and takes the next)."""
        from azure.core.exceptions import HttpResponseError

        name = smoke_record_name(stack, distribution)
        versions = self.clients.versions
        for attempt in range(attempts):
            latest = latest_lock_version(versions, name)   # past a destroyed stack's archived records too
            version = (latest[0] if latest else 0) + 1
            try:
                versions.register(name, str(version), {
                    "image": f"{SMOKE_RECORD_IMAGE}-{uuid.uuid4().hex[:12]}", "tags": tags,
                    "description": f"infra smoke record of stack {stack}, distribution {distribution} "
                                   "(do not use in jobs)"})
                return
            except HttpResponseError:
                if attempt == attempts - 1:
                    raise

    # ---- writes -----------------------------------------------------------------------------------------

    def put_cluster(self, resource: Written, secrets: Any, subnet: str | None,
                    vnet_name: str | None) -> Any:
        """Create, or update in place, through a full PUT (the SDK's begin_update sends a broken subnet), waited
        for to its end. `secrets`: admin_username, admin_password, ssh_key_value (plan's ClusterSecrets)."""
        c = self.clients
        body = compute_body(resource, secrets, subnet, vnet_name, subscription_id=c.subscription_id,
                            resource_group=c.resource_group, location=c.location)
        path = f"{self._workspace_path}/computes/{segment(resource.name)}"
        return compute_values(c.arm.put(path, API_COMPUTES, body))

    def delete_cluster(self, name: str, *, wait_gone_s: float = 600.0, poll_s: float = 0.5) -> None:
        """Delete and wait until a GET says 404: a same-name recreate that races the delete comes back with
        the OLD size (azure-rest-api-specs #18889)."""
        try:   # azure-ai-ml's begin_delete: the nodes' resources go with the cluster
            self.clients.arm.delete(f"{self._workspace_path}/computes/{segment(name)}", API_COMPUTES,
                                    underlyingResourceAction="Delete")
        except Exception as exc:
            if not is_not_found(exc):
                raise
        deadline = time.monotonic() + wait_gone_s
        while self.read_compute(name) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster {name} still exists {wait_gone_s:.0f}s after its delete finished")
            time.sleep(poll_s)

    def archive_environment(self, name: str, stack: str) -> list[str]:
        """Release an environment as Azure ML's users do (its versions are archived, never deleted: jobs may still
        name them): each active version tagged with `stack` loses infra's ownership tags and is archived
        (`az ml environment archive --version`), so no stack owns it and lists no longer show it. Returns the
        versions released; versions of other owners stay as they are."""
        return archive_versions(self.clients.versions, name, keep=lambda tags: tags.get(TAG_STACK) != stack,
                                drop_tags=OWNERSHIP_TAGS)

    def retire_records(self, stack: str, lock: str, lock_released: int | None) -> list[str]:
        """After a destroy: infra's own records of the stack archived as its environments are, their ownership
        tags dropped: every smoke record (`infra-smoke-STACK.*`, distributions no longer in the stack included)
        and the lock's versions up to the one its release registered (`lock_released`: a version registered
        after it is another apply's, left alone). Returns the names of the environments archived."""
        prefix = smoke_record_name(stack, "").lower()
        names = [n for n, _ in self.listed_environments() if n.startswith(prefix)]
        retired = [n for n in names if self.archive_environment(n, stack)]
        if lock_released is not None and archive_versions(self.clients.versions, lock, up_to=lock_released,
                                                          drop_tags=OWNERSHIP_TAGS):
            retired.append(lock)
        return retired

    def forget_environment(self, name: str, stack: str) -> list[str]:
        """`infra state rm`: each version tagged with `stack` loses infra's ownership tags, and nothing else."""
        versions, released = self.clients.versions, []
        for listed in versions.list(name):
            tags = version_tags(listed)
            if tags.get(TAG_STACK) != stack:
                continue
            version = str(listed.get("name"))
            versions.rewrite(name, version, tags={k: v for k, v in tags.items() if k not in OWNERSHIP_TAGS})
            released.append(version)
        return released

    def adopt_environment(self, name: str, version: str, tags: dict[str, str]) -> None:
        """An import block: this version gets infra's ownership `tags` added, and nothing else changes."""
        versions = self.clients.versions
        found = versions.get(name, version)
        versions.rewrite(name, version, tags={**version_tags(found), **tags})

    # an environment's inference_config routes as the REST body names them (azure-ai-ml InferenceContainerProperties)
    _INFERENCE_ROUTES = {"liveness_route": "livenessRoute", "readiness_route": "readinessRoute",
                         "scoring_route": "scoringRoute"}

    def create_environment_version(self, resource: Written, base_dir: Path, conda_file: str | dict | None,
                                   build_files: Callable[[Path], Path] | None) -> Any:
        """Register a new, immutable version (never rewrite one); returns the version registered. conda_file: a
        path relative to base_dir, or the conda YAML inline (a mapping, which azure-ai-ml sends as its YAML text)."""
        a = resource.attributes
        # what azure-ai-ml sends below is the request body: a secret goes there in clear (stack/secret.py)
        common = revealed(dict(name=resource.name, version=a["version"], description=a.get("description"),
                               tags={**a.get("tags", {}), **resource.tags}))
        inference = a.get("inference_config")   # routes, passed through (REST: camel case, as azure-ai-ml sends them)
        if a["kind"] == "image":
            properties = {"image": a["image"], "tags": common["tags"], "description": common["description"],
                          "condaFile": conda_text(base_dir, conda_file),
                          "inferenceConfig": {self._INFERENCE_ROUTES[k]: v for k, v in inference.items()} if inference else None}
            registered = self.clients.versions.register(resource.name, a["version"],
                                                        {k: v for k, v in properties.items() if v is not None})
            return str(registered.get("name") or a["version"])
        from azure.ai.ml.entities import BuildContext, Environment

        with tempfile.TemporaryDirectory(prefix="infra-build-") as tmp, quiet_sdk():  # uploads the context
            build = a.get("build") or {}
            # a remote context (https://, azureml://) goes as its URI: azure-ai-ml uploads nothing for one
            remote = isinstance(build.get("path"), str) and is_remote_context(build["path"])
            context = build["path"] if remote else build_files(Path(tmp)) if build_files else base_dir
            # a user's context may name its Dockerfile otherwise (build.dockerfile_path); a template's is "Dockerfile"
            dockerfile = build.get("dockerfile_path") or "Dockerfile"
            env = Environment(build=BuildContext(path=str(context), dockerfile_path=dockerfile),
                              **({"inference_config": inference} if inference else {}), **common)
            return str(self.clients.ml.environments.create_or_update(env).version)

    # ---- by kind: the kind's codec looked up (azure/kinds.py AZURE_KINDS); last, as `list` names the method here

    def read(self, kind: str, name: str, version: str | None = None) -> dict[str, Any] | None:
        return AZURE_KINDS[kind].read(self, name, version)

    def list(self, kind: str) -> Any:
        return AZURE_KINDS[kind].list(self)

    def write(self, kind: str, resource: Written, **specifics: Any) -> Any:
        return AZURE_KINDS[kind].write(self, resource, **specifics)

    def delete(self, kind: str, name: str, **specifics: Any) -> Any:
        return AZURE_KINDS[kind].delete(self, name, **specifics)
