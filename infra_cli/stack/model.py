"""The stack model. Field names are Azure ML CLI v2 YAML's (amlCompute, environment, command job), so a
user's compute.yml pastes into a stack; our additions are `infiniband`, `lifecycle`, `requires`, `smoke`.
Enumerated values are read in any case (`tier: Dedicated`, `type: PyTorch`), as Azure ML reads them.

The model checks shapes and types only; knowledge-based rules (InfiniBand, GPUs, MPI) live in validate/.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import yaml

from infra_cli.stack.secret import revealed
from infra_cli.stack.fields import (ANY, GRAMMAR_CHECKED, SECRET, Bool, DictOf, Field, Float, Int, ListOf, Model, OneOf,
                                    Str)
from infra_cli.stack.addresses import AddressError, parse_address
from infra_cli.stack.rule_switch import RuleSwitch
from infra_cli.stack.launch import launcher_for as derived_launcher

_AZURE_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# Curated references Azure ML resolves: azureml:NAME@latest, azureml:NAME:VERSION, or a registry URI.
_CURATED_REFERENCE = re.compile(
    r"^azureml:[A-Za-z0-9][A-Za-z0-9_.-]*(?:@latest|:[A-Za-z0-9][A-Za-z0-9_.-]*)$"
    r"|^azureml://registries/[A-Za-z0-9_-]+/environments/[A-Za-z0-9][A-Za-z0-9_.-]*/(?:versions|labels)/[A-Za-z0-9_.-]+$"
    # a curated name without `azureml:`, as azure-ai-ml takes it (its CURATED_ENV_PREFIX) and the guides write it
    r"|^AzureML-[A-Za-z0-9_.-]*(?:@latest|:[A-Za-z0-9][A-Za-z0-9_.-]*)$")
_INT32_MAX = 2**31 - 1  # Azure ML's integer fields (seconds, counts) are 32-bit


def _filled(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


def _number_not_bool(v: Any) -> Any:
    if isinstance(v, bool):  # YAML true/false would otherwise read as 1/0
        raise ValueError("expected a whole number, not true/false")
    return v


# A string that says something: "" or "  " is never a usable name, path or reference.
Text = Str(after=_filled)
# Free text (a command, a description): the same, with its tabs and line breaks.
FreeText = Str(after=_filled, free_text=True)
# Where a sensitive value may stand and stays one (stack/secret.py): tags, descriptions, a job's variables.
Secretive = Str(keeps_secret=True)
SecretiveText = Str(free_text=True, keeps_secret=True)


def _path_text(v: str) -> str:
    """A path no file system refuses by its length alone (Linux: NAME_MAX 255 bytes a name, PATH_MAX 4096 bytes)."""
    _filled(v)
    if len(v.encode("utf-8", "surrogatepass")) >= 4096:
        raise ValueError("is longer than a path can be (4,095 bytes)")
    if any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in v.replace("\\", "/").split("/")):
        raise ValueError("has a name longer than a file name can be (255 bytes)")
    return v


# A file or folder the stack names, relative to the stack file.
PathText = Str(after=_path_text)
# A whole number written as one (not true/false).
Count = Int(before=_number_not_bool)
# Enumerated values (OneOf) are read in any case; `aliases` maps other spellings Azure uses (REST's LowPriority).


# Azure ML's default VM size for an AmlCompute cluster whose YAML omits `size`
# (https://learn.microsoft.com/azure/machine-learning/reference-yaml-compute-aml).
AML_DEFAULT_SIZE = "Standard_DS3_v2"
AML_COMPUTE_SCHEMA = "https://azuremlschemas.azureedge.net/latest/amlCompute.schema.json"


def _guid(v: str) -> str:
    if not _AZURE_GUID.match(v):
        raise ValueError("must be a GUID like 00000000-0000-0000-0000-000000000000")
    return v.lower()


# Azure's clouds by the names azure-ai-ml and the Azure CLI give them (`az cloud list`); their endpoints are
# validators/clouds.yaml (knowledge/clouds.py), held equal to the SDKs' own cloud metadata by a test.
CLOUDS = ("AzureCloud", "AzureUSGovernment", "AzureChinaCloud")


def _cloud_name(v: Any) -> Any:
    """A cloud's name in any case; anything else is refused naming the closest one."""
    if not isinstance(v, str) or v.lower() in (c.lower() for c in CLOUDS):
        return v
    by_lower = {c.lower(): c for c in CLOUDS}
    close = difflib.get_close_matches(v.lower(), list(by_lower), n=1, cutoff=0.5)
    mean = f"did you mean {by_lower[close[0]]!r}? " if close else ""
    raise ValueError(f"{v!r} is not an Azure cloud: {mean}use one of {', '.join(CLOUDS)}")


class Workspace(Model):
    """The Azure ML workspace every resource of the stack lives in."""

    subscription_id = Field(Str(), description="Azure subscription id (a GUID)", after=_guid)
    resource_group = Field(Text, description="resource group of the workspace")
    name = Field(Text, description="workspace name")
    location = Field(Text, description="Azure region of the workspace, e.g. eastus",
                     after=lambda v: v.replace(" ", "").lower())
    cloud = Field(OneOf(*CLOUDS, aliases={c.lower(): c for c in CLOUDS}), "AzureCloud", before=_cloud_name,
                  description="the Azure cloud of the workspace (any case): AzureCloud (public), AzureUSGovernment "
                              "or AzureChinaCloud; ARM endpoint, sign-in authority and registry discovery follow it")


class SshSettings(Model):
    """SSH access to the nodes (amlCompute ssh_settings). Pass secrets as ${VAR}: they are never written out."""

    admin_username = Field(Text | None, None, description="administrator user on each node")
    admin_password = Field(SECRET | None, None, description="secret: write ${VAR}, never the password itself")
    ssh_key_value = Field(SECRET | None, None, description="SSH public key; write ${VAR} (e.g. ${SSH_PUBLIC_KEY})")


class NetworkSettings(Model):
    """Virtual network placement (amlCompute network_settings); changing it replaces the cluster."""

    vnet_name = Field(Text | None, None, description="virtual network name (with subnet as a name)")
    subnet = Field(Text | None, None, description="subnet name (with vnet_name) or full ARM id")


class UserAssignedIdentity(Model):
    """One user-assigned managed identity."""

    resource_id = Field(Text, description="ARM id of a user-assigned managed identity")


class Identity(Model):
    """Managed identity of the cluster (amlCompute identity)."""

    type = Field(OneOf("system_assigned", "user_assigned", "system_assigned,user_assigned", "none",
                       aliases={"SystemAssigned": "system_assigned", "UserAssigned": "user_assigned",
                                "SystemAssigned,UserAssigned": "system_assigned,user_assigned"}),
                 description="which managed identities the nodes get (any case)")
    user_assigned_identities = Field(ListOf(UserAssignedIdentity) | None, None,
                                     description="with type user_assigned: the identities, each {resource_id: ...}")


class Lifecycle(Model):
    """What plans may do to the resource."""

    prevent_destroy = Field(Bool(), False, description="refuse plans that delete or replace this cluster")


class Cluster(Model):
    """An Azure ML compute cluster; field names are amlCompute's in Azure ML CLI v2 YAML, so an `az ml compute`
    YAML file pastes in unchanged (its `$schema`, `name` and `type` included)."""

    schema_url = Field(Str() | None, None, alias="$schema", description="the amlCompute YAML schema; ignored "
                       f"(pasted from an `az ml compute` file, e.g. {AML_COMPUTE_SCHEMA})")
    name = Field(Text | None, None, description="the Azure ML compute name; when given (a pasted compute YAML) it "
                 "must equal this cluster's key, which is always the name infra creates in Azure")
    type = Field(OneOf("amlcompute"), "amlcompute",
                 description="only amlcompute clusters are managed (any case: AmlCompute)")
    # checked against the catalog by validate (cluster.size-unknown), control characters included
    size = Field(Str(after=_filled, grammar_checked=True), AML_DEFAULT_SIZE,
                 description="VM size, e.g. Standard_ND96asr_v4 (see `infra skus "
                 f"--infiniband`); default {AML_DEFAULT_SIZE}, Azure ML's default for a compute YAML without size")
    tier = Field(OneOf("dedicated", "low_priority", aliases={"lowpriority": "low_priority"}), "dedicated",
                 description="VM priority, any case (Dedicated, low_priority, LowPriority); changing it "
                 "replaces the cluster")
    min_instances = Field(Count, 0, ge=0, le=_INT32_MAX, description="nodes kept running when idle (changes in place)")
    max_instances = Field(Count, 1, ge=1, le=_INT32_MAX, description="most nodes the cluster scales to (changes in place)")
    idle_time_before_scale_down = Field(Count, 120, ge=0, le=_INT32_MAX,
                                        description="seconds a node idles before it is released")
    enable_node_public_ip = Field(Bool(), True,
                                  description="give nodes public IPs; false needs a subnet with outbound access")
    ssh_public_access_enabled = Field(Bool() | None, None, description="open the SSH port of the nodes")
    ssh_settings = Field(SshSettings | None, None)
    network_settings = Field(NetworkSettings | None, None)
    identity = Field(Identity | None, None)
    location = Field(Text | None, None, description="region of the cluster; defaults to the workspace's")
    tags = Field(DictOf(Secretive), factory=dict, description="Azure tags (text values)")
    description = Field(SecretiveText | None, None, description="free text shown in Azure ML studio")
    infiniband = Field(OneOf("required", "optional") | None, None,
                       description="required: the size must give InfiniBand to NCCL/MPI (an error otherwise); "
                       "optional (as unset): TCP sockets allowed, a warning for GPU jobs across nodes")
    lifecycle = Field(Lifecycle, factory=Lifecycle)

    def _check(self) -> None:
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")


class Build(Model):
    """An image Azure ML builds: from one of our Dockerfile templates, or from your own build context."""

    template = Field(Text | None, None, description="a Dockerfile template from templates/docker/, e.g. openmpi-rdma")
    parameters = Field(DictOf(GRAMMAR_CHECKED), factory=dict, description="the template's parameters")
    path = Field(PathText | None, None, description="a build context directory, relative to the stack file, or a "
                 "remote one Azure ML fetches itself (https://... or azureml://...), never read here")
    dockerfile_path = Field(PathText, "Dockerfile", description="the Dockerfile inside the build context")

    def _check(self) -> None:
        if (self.template is None) == (self.path is None):
            raise ValueError("build needs exactly one of `template` or `path`")
        if self.remote and _CREDENTIAL_IN_URL.search(revealed(self.path)):
            # a plan, a plan file and a rendered environment show the URI: a credential in it would be shown too
            raise ValueError("a remote build context's URL holds a credential (a SAS signature or a user:password@): "
                             "plans and rendered files show this URL; use an azureml://datastores/... URI, or a URL "
                             "the workspace's identity can read without one")

    @property
    def remote(self) -> bool:
        """A build context Azure ML fetches from a URL (azure-ai-ml uploads nothing for one: its
        `is_url`/`is_registry_id_for_resource`): identified by its URI, never looked up on this machine."""
        return self.path is not None and is_remote_context(self.path)

    @property
    def local_path(self) -> str | None:
        """`path` when it names a directory of the stack's project (relative to the stack file), else None."""
        return None if self.path is None or self.remote else self.path


# The paths azure-ai-ml takes as a build context without a local lookup: its `is_url` (urlparse finds a scheme
# and a location: https://..., an azureml://datastores/... or azureml://registries/... URI).
_REMOTE_CONTEXT = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+")
# A credential written into a URL: a SAS signature (sig=) or user information before the host.
_CREDENTIAL_IN_URL = re.compile(r"[?&](?:sig|signature|token|access_token|code)=|^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*@",
                                re.IGNORECASE)


def is_remote_context(path: str) -> bool:
    return bool(_REMOTE_CONTEXT.match(path))


class Route(Model):
    """One route of an inference server (azure-ai-ml RouteSchema)."""

    port = Field(Count, ge=1, le=65535, description="the port the server listens on")
    path = Field(Text, description="the route's path, e.g. /score")


class InferenceConfig(Model):
    """An environment's inference_config (azure-ai-ml InferenceConfigSchema): all three routes are required."""

    liveness_route = Field(Route, description="{port, path} Azure ML probes for liveness")
    readiness_route = Field(Route, description="{port, path} Azure ML probes for readiness")
    scoring_route = Field(Route, description="{port, path} requests are scored on")


def _version_text(v: Any) -> Any:
    if isinstance(v, float):  # YAML reads 1.10 as 1.1: the text the user meant is already lost
        raise ValueError(f"write the version in quotes (version: \"{v}\"); YAML reads it as a number")
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _curated_reference(v: str | None) -> str | None:
    if v is not None and not _CURATED_REFERENCE.match(v.strip()):
        raise ValueError(f"{v!r} is not a curated environment reference: write azureml:NAME@latest, "
                         "azureml:NAME:VERSION, AzureML-NAME@latest or "
                         "azureml://registries/REGISTRY/environments/NAME/versions/VERSION")
    return v


def _conda_file(v: Any) -> Any:
    """A path to a conda YAML file, or the conda YAML inline (a mapping), as azure-ai-ml's Environment and the
    environment YAML reference take `conda_file`."""
    if isinstance(v, dict):
        try:
            yaml.safe_dump(v)
        except (yaml.YAMLError, RecursionError):
            raise ValueError("the inline conda YAML holds a value that is not plain YAML (text, number, list, "
                             "mapping)") from None
        return v
    if v is None or isinstance(v, str):
        controls = sorted({c for c in v or "" if ord(c) < 32 or ord(c) == 127})   # ANY lets a line break through
        if controls:
            raise ValueError(f"Text should hold no control characters, found {', '.join(map(repr, controls))} "
                             "(a path holds none)")
        return v if v is None else _path_text(v)
    raise ValueError("expected the path of a conda YAML file (conda_file: conda.yml) or the conda YAML inline "
                     "(conda_file: {dependencies: [python=3.10, {pip: [torch]}]})")


AML_ENVIRONMENT_SCHEMA = "https://azuremlschemas.azureedge.net/latest/environment.schema.json"


class Environment(Model):
    """A training environment: exactly one of `curated`, `image` or `build`. An `az ml environment` YAML file
    pastes in unchanged (its `$schema` and `name` included)."""

    schema_url = Field(Str() | None, None, alias="$schema", description="the environment YAML schema; ignored "
                       f"(pasted from an `az ml environment` file, e.g. {AML_ENVIRONMENT_SCHEMA})")
    name = Field(Text | None, None, description="the Azure ML environment name; when given (a pasted environment "
                 "YAML) it must equal this environment's key, which is always the name infra registers")

    curated = Field(Text | None, None, after=_curated_reference,
                    description="azureml:NAME@latest, azureml:NAME:VERSION or azureml://registries/...")
    # held to the OCI reference grammar by validate (environment.image-reference), control characters included
    image = Field(Str(after=_filled, grammar_checked=True) | None, None,
                  description="a container image reference, e.g. myacr.azurecr.io/train:1.0")
    conda_file = Field(ANY | None, None, after=_conda_file,
                       description="with image: a conda YAML file, relative to the stack file, or its YAML inline "
                                   "(a mapping, as in Azure ML's environment YAML)")
    build = Field(Build | None, None)
    requires = Field(ListOf(Str()), factory=list, description="image requirement specs, e.g. openmpi>=4.1")
    version = Field(Text | None, None, before=_version_text,
                    description="environment version; default: derived from the content")
    tags = Field(DictOf(Secretive), factory=dict, description="Azure tags (text values)")
    description = Field(SecretiveText | None, None, description="free text")
    os_type = Field(OneOf("linux"), "linux", description="only Linux images run distributed GPU training (any case: Linux)")
    inference_config = Field(InferenceConfig | None, None, description="the routes of an inference server in the "
                             "image, as Azure ML's environment YAML writes them; passed through as written")

    def _check(self) -> None:
        given = [k for k in ("curated", "image", "build") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("an environment needs exactly one of `curated`, `image` or `build`"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.conda_file is not None and self.image is None:
            raise ValueError("`conda_file` goes with `image` only")
        if self.curated is not None and self.version is not None:
            raise ValueError("a curated environment is referenced, not versioned: put the version in the reference")

    @property
    def kind(self) -> str:
        return "curated" if self.curated else "image" if self.image else "build"

    @property
    def conda_path(self) -> str | None:
        """conda_file when it names a file (relative to the stack file), else None."""
        return self.conda_file if isinstance(self.conda_file, str) else None

    @property
    def inline_conda(self) -> str | None:
        """conda_file written inline, as the YAML text infra renders to a file, hashes and registers; else None."""
        if not isinstance(self.conda_file, dict):
            return None
        return inline_conda_text(self.conda_file)


class Smoke(Model):
    """The smoke-test job `infra apply` / `infra smoke` run to prove the distribution works."""

    enabled = Field(Bool(), True, description="run the smoke job after apply")
    busbw_fraction = Field(Float(), 0.8, gt=0, le=1.0, description="fraction of the size's healthy busbw to pass")
    max_message_bytes = Field(Count | None, None, gt=0, le=1 << 34,
                              description="largest all_reduce message; default: the size's")
    steps = Field(Count, 5, ge=1, le=1000, description="timed all_reduce iterations per message size")
    timeout_minutes = Field(Count, 30, ge=1, le=60 * 24 * 30, description="give up on the smoke job after this long")
    experiment_name = Field(Text | None, None, description="Azure ML experiment of the smoke job")


Framework = OneOf("ddp", "deepspeed", "horovod", "lightning", "transformers", "tensorflow")
DistributionType = OneOf("pytorch", "mpi", "tensorflow", "ray")
# The keys of each distribution type but `type` (azure-ai-ml's distribution schemas, validators/job_schema.yaml).
TYPE_KEYS: dict[str, tuple[str, ...]] = {
    "pytorch": ("process_count_per_instance",),
    "mpi": ("process_count_per_instance",),
    "tensorflow": ("worker_count", "parameter_server_count"),
    "ray": ("port", "address", "include_dashboard", "dashboard_port", "head_node_additional_args",
            "worker_node_additional_args"),
}
# Ray's keys stay in the pasted `distribution:` block (a flat `port` or `address` would say nothing of Ray)
RAY_KEYS = TYPE_KEYS["ray"]


# A compute named by a job, as azure-ai-ml reads `compute:`: azureml:NAME or NAME (a compute of the workspace:
# one REST path segment, letters, digits, hyphens, underscores), or the ARM id of a workspace's compute or of a
# Singularity virtual cluster (azure-ai-ml's test_configs/command_job/command_job_singularity_test.yml), with or
# without azureml:.
_COMPUTE_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,254}"
_COMPUTE_REFERENCE = re.compile(
    rf"(?:azureml:)?(?:(?P<name>{_COMPUTE_NAME})|/subscriptions/[A-Za-z0-9_-]+/resourceGroups/[A-Za-z0-9._()-]+"
    rf"/providers/Microsoft\.MachineLearningServices/(?:(?P<vc>virtualclusters)/(?P<vc_name>{_COMPUTE_NAME})|"
    rf"workspaces/[A-Za-z0-9_-]+/computes/(?P<ws_name>{_COMPUTE_NAME})))", re.IGNORECASE)


def _serverless_named(reference: str) -> bool:
    """`compute: serverless` (or azureml:serverless): azure-ai-ml sends it as is, Azure ML's serverless compute
    (azure.ai.ml.constants SERVERLESS_COMPUTE), as a job without compute: runs."""
    return reference.removeprefix("azureml:") == "serverless"


def _compute_reference(v: str | None) -> str | None:
    if v is not None and _COMPUTE_REFERENCE.fullmatch(v) is None:
        raise ValueError("expected azureml:NAME (a compute of the workspace: letters, digits, - and _), or the ARM "
                         "id of a workspace's compute or of a virtual cluster (/subscriptions/.../providers/"
                         "Microsoft.MachineLearningServices/virtualclusters/NAME)")
    return v


class JobDistribution(Model):
    """A command job's `distribution:` block, pasted unchanged; read into the flat fields beside it."""

    # Required by Azure ML's job schema; here it may also be the flat `type` beside the block.
    type = Field(DistributionType | None, None, description="Azure ML distribution type (any case: PyTorch, Mpi, "
                 "TensorFlow, Ray); given here or as the distribution's flat type")
    process_count_per_instance = Field(Count | None, None, ge=1, le=_INT32_MAX, description="pytorch, mpi")
    worker_count = Field(Count | None, None, ge=1, le=_INT32_MAX, description="tensorflow")
    parameter_server_count = Field(Count | None, None, ge=0, le=_INT32_MAX, description="tensorflow")
    port = Field(Count | None, None, ge=1, le=65535, description="ray: the head node's port (ray start --port)")
    address = Field(Text | None, None, description="ray: the address of a Ray cluster to join (HOST:PORT)")
    include_dashboard = Field(Bool() | None, None, description="ray: start Ray's dashboard")
    dashboard_port = Field(Count | None, None, ge=1, le=65535, description="ray: the dashboard's port")
    head_node_additional_args = Field(Text | None, None, description="ray: more arguments to `ray start` on the "
                                      "head node")
    worker_node_additional_args = Field(Text | None, None, description="ray: more arguments to `ray start` on "
                                        "every other node")

    def ray_settings(self) -> dict[str, Any]:
        """The Ray keys this block sets."""
        return {k: getattr(self, k) for k in RAY_KEYS if getattr(self, k) is not None}


def _docker_args(v: Any) -> Any:
    if v is None or isinstance(v, str) or (isinstance(v, list) and all(isinstance(a, str) for a in v)):
        return v
    raise ValueError("expected text (\"--ipc=host\") or a list of texts, as azure-ai-ml reads docker_args")


# Docker reads --shm-size as a byte count in a signed 64-bit integer (RAMInBytes,
# https://github.com/docker/go-units/blob/master/size.go; units are powers of 1024): more does not parse.
_SHM_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_INT64_MAX = 2**63 - 1


def _shm_size(v: str | None) -> str | None:
    if v is None:
        return v
    digits, unit = v.rstrip("bkmgBKMG").lstrip("0") or "0", v[-1].lower() if v[-1].isalpha() else ""
    if len(digits) > 19 or int(digits) * _SHM_UNITS[unit] > _INT64_MAX:   # 2**63 has 19 digits
        raise ValueError("more bytes than Docker's --shm-size reads (a 64-bit count: at most 8589934591g)")
    return v


class JobResources(Model):
    """A command job's `resources:` block, pasted unchanged: instance_count is read into the flat field beside it,
    the other keys (validators/job_schema.yaml `resources`, azure-ai-ml's own) go to the job as written."""

    instance_count = Field(Count | None, None, ge=1, le=_INT32_MAX, description="nodes the job runs on (the flat "
                           "instance_count)")
    instance_type = Field(Text | None, None, description="instance type (Kubernetes or serverless compute)")
    shm_size = Field(Str(pattern=r"^[0-9]+[bkmgBKMG]?$") | None, None, after=_shm_size,
                     description="size of the container's /dev/shm, e.g. 3g (Docker's --shm-size)")
    docker_args = Field(ANY | None, None, after=_docker_args,
                        description="extra arguments to the container's docker run (text or a list of texts)")
    properties = Field(DictOf(ANY), factory=dict, description="properties of the job's resources")
    locations = Field(ListOf(Text), factory=list, description="regions the job may run in")
    max_instance_count = Field(Count | None, None, ge=1, le=_INT32_MAX, description="most nodes (elastic training)")


class JobLimits(Model):
    """A command job's `limits:` block."""

    timeout = Field(Count | None, None, ge=1, le=_INT32_MAX, description="seconds before Azure ML cancels the job")


class JobQueueSettings(Model):
    """A command job's `queue_settings:` block."""

    job_tier = Field(OneOf("null", "spot", "basic", "standard", "premium") | None, None,
                     description="the job's tier (any case: Spot, Standard, ...)")
    priority = Field(OneOf("low", "medium", "high") | None, None, description="priority within the tier")


# Where each key of the nested blocks lands in the flat form (the one rules and templates read).
NESTED_DISTRIBUTION_KEYS: dict[str, tuple[str, ...]] = {
    "distribution": tuple(k for k in JobDistribution.model_fields if k not in RAY_KEYS),
    "resources": ("instance_count",),
}
# The keys of a command job YAML (validators/job_schema.yaml `command_job`) a distribution does not hold, and
# where each goes instead; tests/realworld/test_job_schema.py holds every other key to be a Distribution field.
JOB_KEYS_ELSEWHERE: dict[str, str] = {
    "$schema": "infra render writes it",
    "type": "always `command`; a distribution's `type` is its distribution type",
    "name": "a job name is unique in the workspace: Azure ML names each submission",
    "parent_job_name": "pipeline jobs only",
    "compute": "the distribution's `cluster` (the compute becomes a cluster entry), or its `compute: azureml:NAME` "
               "for a compute infra does not manage; none: serverless compute",
    "environment": "the distribution's `environment`: the job's environment becomes an environments entry",
}


def flatten_distribution(raw: dict) -> tuple[dict, list[tuple[str, str]], list[tuple[str, str]]]:
    """A distribution mapping with its pasted `distribution:`/`resources:` blocks read into the flat keys.

    Returns (flat mapping, moved (block, key) pairs, conflicting (block, key) pairs: the same key given flat
    with another value). Keys a block does not know stay in it, so the model reports them where written."""
    flat = dict(raw)
    moved: list[tuple[str, str]] = []
    conflicts: list[tuple[str, str]] = []
    for block, keys in NESTED_DISTRIBUTION_KEYS.items():
        nested = flat.get(block)
        if not isinstance(nested, dict):
            continue
        rest = dict(nested)
        for key in keys:
            if key not in rest:
                continue
            value = rest.pop(key)
            if key in raw and not _same_value(raw[key], value):
                conflicts.append((block, key))
                continue
            flat[key] = value
            moved.append((block, key))
        if rest:
            flat[block] = rest
        else:
            del flat[block]
    return flat, moved, conflicts


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()  # enum text in any case
    return type(a) is type(b) and a == b


def _env_text(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: (str(x).lower() if isinstance(x, bool) else str(x) if isinstance(x, (int, float)) else x)
                for k, x in v.items()}
    return v


class Distribution(Model):
    """How a training job spreads over a cluster: the command job's `distribution` and `resources` fields, flat
    (type, instance_count, ...) or as the job's own `distribution:` and `resources:` blocks pasted unchanged."""

    cluster = Field(Text | None, None, description="name of a cluster in this stack; without it the job runs on a "
                    "`compute` infra does not manage, or on Azure ML's serverless compute (resources.instance_type)")
    compute = Field(Str(after=_compute_reference) | None, None, description="a compute infra does not manage "
                    "(azureml:NAME: a Kubernetes (Arc) compute, a Singularity virtual cluster, an AmlCompute made "
                    "elsewhere): plan reads it live, apply never creates or deletes it")
    environment = Field(Text, description="name of an environment in this stack")
    type = Field(DistributionType | None, None, description="Azure ML distribution type (any case), or give "
                 "distribution.type; none: a command job without a distribution, on one node (the command runs once)")
    instance_count = Field(Count, 1, ge=1, le=_INT32_MAX, description="nodes the job runs on")
    process_count_per_instance = Field(
        Count | None, None, ge=1, le=_INT32_MAX, description="processes Azure ML starts per node (pytorch, mpi); one per GPU")
    worker_count = Field(Count | None, None, ge=1, le=_INT32_MAX,
                         description="tensorflow: workers (default instance_count)")
    parameter_server_count = Field(Count | None, None, ge=0, le=_INT32_MAX, description="tensorflow: parameter servers")
    launcher = Field(OneOf("per-process", "per-node"), "per-process",
                     description="per-process: Azure ML starts every process; per-node: a launcher started once "
                                 "per node does (torchrun, deepspeed, accelerate launch, Lightning). Derived from "
                                 "`command` and `framework` when not given; a declared one must agree")
    framework = Field(Framework | None, None, description="the training framework, for its launch rules")
    environment_variables = Field(DictOf(Secretive, key=Str(grammar_checked=True)), factory=dict, before=_env_text,
                                  description="set in every process")   # names: distribution.environment-variable-name
    smoke = Field(Smoke, factory=Smoke)
    command = Field(FreeText | None, None, description="your own training command, rendered next to the smoke job")
    code = Field(PathText | None, None, description="directory of your training code, relative to the stack file")
    distribution = Field(
        JobDistribution | None, None, description="a command job's distribution block, pasted as is; the same as the "
        "flat type, process_count_per_instance, worker_count, parameter_server_count (a value given both ways must agree)")
    resources = Field(
        JobResources | None, None, description="a command job's resources block, pasted as is; instance_count is the "
        "flat instance_count, the other keys go to the job as written")
    inputs = Field(DictOf(ANY), factory=dict, description="a command job's inputs, as in its YAML: a value or "
                   "{type, path, mode}; the command names them as ${{inputs.NAME}}")
    outputs = Field(DictOf(ANY), factory=dict, description="a command job's outputs, as in its YAML; the command "
                    "names them as ${{outputs.NAME}}")
    limits = Field(JobLimits | None, None, description="a command job's limits block ({timeout: SECONDS})")
    services = Field(DictOf(ANY), factory=dict, description="a command job's services (jupyter_lab, ssh, "
                     "tensor_board, vs_code), as in its YAML")
    queue_settings = Field(JobQueueSettings | None, None, description="a command job's queue_settings block")
    identity = Field(DictOf(ANY) | None, None, description="a command job's identity ({type: user_identity | "
                     "managed | aml_token})")
    tags = Field(DictOf(Secretive), factory=dict, before=_env_text, description="tags of the training job")
    properties = Field(DictOf(ANY), factory=dict, description="properties of the training job")
    display_name = Field(Text | None, None, description="the training job's name in Azure ML studio")
    experiment_name = Field(Text | None, None, description="the training job's experiment")
    description = Field(SecretiveText | None, None, description="the training job's description")

    @classmethod
    def _prepare(cls, data: Any) -> Any:
        """Read pasted blocks into the flat fields (the loader does this first, with positions)."""
        if not isinstance(data, dict):
            return data
        flat, _, conflicts = flatten_distribution(data)
        if conflicts:
            block, key = conflicts[0]
            raise ValueError(f"{block}.{key} and {key} disagree ({data[block][key]!r} vs {data[key]!r})")
        return flat

    def _check(self) -> None:
        if self.cluster is not None and self.compute is not None:
            raise ValueError("cluster and compute both name where the job runs: keep `cluster:` for a cluster of "
                             "this stack, or `compute: azureml:NAME` for one infra does not manage")
        # Ray's keys where the type is not ray, process_count_per_instance under ray or no type (the tensorflow
        # type's keys elsewhere: distribution.tensorflow-counts says where they are)
        given = [k for k in (("process_count_per_instance",) if self.type in (None, "ray") else ()) + RAY_KEYS
                 if getattr(self, k, None) is not None or (self.distribution is not None and
                                                          getattr(self.distribution, k) is not None)]
        foreign = [k for k in given if k not in TYPE_KEYS.get(self.type or "", ())]
        if foreign:   # azure-ai-ml refuses the job: its schema for the type has no such key ("Unknown field")
            raise ValueError(f"{', '.join(foreign)} {'is' if len(foreign) == 1 else 'are'} no key of "
                             + (f"a {self.type} distribution" if self.type else "a job without a distribution type")
                             + (f" (it takes {', '.join(TYPE_KEYS[self.type])})" if self.type else
                                f": set type ({', '.join(TYPE_KEYS)}) or remove {'it' if len(foreign) == 1 else 'them'}"))
        # The command says how processes start (torchrun ... is per-node); a declared `launcher` is kept as
        # written so `infra validate` can report where it disagrees with the command.
        if "launcher" not in self.model_fields_set:
            try:
                derived = derived_launcher(self.command, self.framework)
            except (OSError, LookupError, TypeError, ValueError):  # a broken validators/: the rules report it
                derived = None
            if derived is not None:
                self.__dict__["launcher"] = derived  # frozen instance: set once, while it is being built

    @property
    def runs_on(self) -> str:
        """Where the job runs: "cluster" (one of this stack's), "compute" (one infra does not manage, read live by
        plan) or "serverless" (Azure ML's serverless compute: the size is resources.instance_type)."""
        return "cluster" if self.cluster is not None else \
            "compute" if self.compute is not None and not _serverless_named(self.compute) else "serverless"

    @property
    def compute_name(self) -> str | None:
        """The name of the compute infra does not manage (`compute: azureml:NAME` without its prefix, an ARM id's
        last segment)."""
        m = _COMPUTE_REFERENCE.fullmatch(self.compute) if self.runs_on == "compute" else None
        return None if m is None else m.group("name") or m.group("vc_name") or m.group("ws_name")

    @property
    def virtual_cluster(self) -> bool:
        """The compute is a Singularity virtual cluster (an ARM resource of its own, outside the workspace)."""
        m = _COMPUTE_REFERENCE.fullmatch(self.compute) if self.compute is not None else None
        return m is not None and m.group("vc") is not None

    @property
    def instance_type(self) -> str | None:
        """The size a serverless job asks for (resources.instance_type); None where Azure ML picks one."""
        return self.resources.instance_type if self.resources is not None else None

    @property
    def processes_per_instance(self) -> int:
        return self.process_count_per_instance or 1

    @property
    def ray(self) -> dict[str, Any]:
        """A ray distribution's settings (port, address, dashboard, ...), as given in its `distribution:` block."""
        return self.distribution.ray_settings() if self.distribution is not None else {}


def _empty_section(v: Any) -> Any:
    return {} if v is None else v  # `clusters:` with nothing under it means none


class Variable(Model):
    """An input variable (Terraform's `variable`): `${var.NAME}` anywhere in the stack; its value from `default`,
    INFRA_VAR_NAME, `--var-file FILE` or `--var NAME=VALUE` (later wins, in that order)."""

    type = Field(OneOf("string", "number", "bool", "list", "map") | None, None,
                 description="string, number, bool, list or map; a value that is exactly ${var.NAME} keeps it")
    default = Field(ANY, None, description="the value when none is given")
    allowed = Field(ListOf(ANY) | None, None, description="the only values accepted")
    description = Field(Str() | None, None, description="what the variable is for")
    sensitive = Field(Bool(), False, description="never shown in output, plan files or logs")


class Output(Model):
    """An output value (Terraform's `output`), read live by `infra output STACK [NAME]`."""

    value = Field(ANY, description="an attribute of a resource: ${cluster.NAME.id}, ${environment.NAME.asset_id}, "
                                   "${smoke.NAME.verdict}, or text around such references")
    description = Field(Str() | None, None, description="what the value is for")
    sensitive = Field(Bool(), False, description="shown as (sensitive value) unless asked for by name")


def inline_conda_text(conda: dict) -> str:
    """A conda file written inline, as the YAML text infra renders to a file, hashes and registers."""
    # sent to Azure as the environment's conda file (a secret in it, e.g. a package index token, in clear)
    return yaml.safe_dump(revealed(conda), sort_keys=False, default_flow_style=False, allow_unicode=True)


def _import_address(v: str) -> str:
    try:
        return str(parse_address(v))   # the one address grammar (stack/addresses.py)
    except AddressError as exc:
        raise ValueError("must be cluster.NAME or environment.NAME (only clusters and environments are imported)"
                         + (f": {exc.detail}" if exc.detail else "") + f"; {exc.hint}") from None


class Import(Model):
    """An import block (Terraform's `import`): adopt a cluster or environment that exists in Azure but was not made
    by this stack. Plan says it will be imported, apply writes this stack's ownership tags on it and then converges
    it; once adopted the block changes nothing."""

    to = Field(Text, description="the address it becomes: cluster.NAME or environment.NAME", after=_import_address)
    # held to the address grammar's rule for NAME by validate's import_blocks (it depends on `to`'s kind), which
    # says what a name is where an empty one is refused too
    id = Field(Str(), description="its name in the Azure ML workspace (Azure ML cannot rename: the same as NAME)")


def _empty_list(v: Any) -> Any:
    return [] if v is None else v  # `import:` with nothing under it means none


class Stack(Model):
    """An infra stack file: Azure ML clusters, environments and distributions, planned and applied together."""

    stack = Field(Str(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$"),
                  description="the stack's name; written as a tag on everything it creates")
    workspace = Field(Workspace)
    clusters = Field(DictOf(Cluster), factory=dict, before=_empty_section, description="compute clusters by name")
    environments = Field(DictOf(Environment), factory=dict, before=_empty_section, description="environments by name")
    distributions = Field(DictOf(Distribution), factory=dict, before=_empty_section,
                          description="distributed jobs (each gets a smoke test) by name")
    variables = Field(DictOf(Variable), factory=dict, before=_empty_section,
                      description="input variables by name, used as ${var.NAME}")
    outputs = Field(DictOf(Output), factory=dict, before=_empty_section,
                    description="output values by name (`infra output STACK`)")
    imports = Field(ListOf(Import), factory=list, before=_empty_list, alias="import",
                    description="existing clusters and environments to adopt: [{to: cluster.NAME, id: NAME}]")
    rules = Field(DictOf(RuleSwitch), factory=dict, before=_empty_section,
                  description="rules of `infra rules` switched for this stack: {ID: {enabled: false, reason: WHY}}; "
                              "a rule's warnings are switched off, never its errors")

    def size_of(self, dist: Distribution) -> str | None:
        """The size the distribution runs on, the one place validate, render and plan read it from: its cluster's
        size, a serverless job's resources.instance_type; None where offline cannot know it (a compute infra does
        not manage, whose size plan reads live; a serverless job without instance_type: Azure ML picks one)."""
        if dist.cluster is not None:
            cluster = self.clusters.get(dist.cluster)
            return cluster.size if cluster is not None else None
        return dist.instance_type if dist.runs_on == "serverless" else None

    def compute_of(self, dist: Distribution) -> str | None:
        """The job's `compute:` (azureml:NAME), None for serverless compute (the job names none)."""
        if dist.runs_on == "compute" and "/" in dist.compute:
            return dist.compute   # an ARM id, as written (azure-ai-ml reads it with or without azureml:)
        name = dist.cluster if dist.cluster is not None else dist.compute_name
        return f"azureml:{name}" if name is not None else None
