"""The stack model. Field names are Azure ML CLI v2 YAML's (amlCompute, environment, command job), so a
user's compute.yml pastes into a stack; our additions are `infiniband`, `lifecycle`, `requires`, `smoke`.
Enumerated values are read in any case (`tier: Dedicated`, `type: PyTorch`), as Azure ML reads them.

The model checks shapes and types only; knowledge-based rules (InfiniBand, GPUs, MPI) live in validate/.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, field_validator, model_validator

from infra_cli.validate.launch import launcher_for as derived_launcher

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
Text = Annotated[str, AfterValidator(_filled)]
# A whole number written as one (not true/false).
Count = Annotated[int, BeforeValidator(_number_not_bool)]


def _enum_text(*aliases: tuple[str, str]):
    """Read an enumerated value in any case; `aliases` maps other spellings Azure uses (REST's LowPriority)."""
    table = {a.lower(): b for a, b in aliases}

    def fold(v: Any) -> Any:
        return table.get(v.lower(), v.lower()) if isinstance(v, str) else v
    return BeforeValidator(fold)


# Azure ML's default VM size for an AmlCompute cluster whose YAML omits `size`
# (https://learn.microsoft.com/azure/machine-learning/reference-yaml-compute-aml).
AML_DEFAULT_SIZE = "Standard_DS3_v2"
AML_COMPUTE_SCHEMA = "https://azuremlschemas.azureedge.net/latest/amlCompute.schema.json"


class _Strict(BaseModel):
    # defer_build: each class builds its validator on first use; `_build_validators` at the end builds the
    # one a stack file needs (Stack's, nested models inline) once, instead of one per class at definition.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Workspace(_Strict):
    """The Azure ML workspace every resource of the stack lives in."""

    subscription_id: str = Field(description="Azure subscription id (a GUID)")
    resource_group: Text = Field(description="resource group of the workspace")
    name: Text = Field(description="workspace name")
    location: Text = Field(description="Azure region of the workspace, e.g. eastus")

    @field_validator("subscription_id")
    @classmethod
    def _guid(cls, v: str) -> str:
        if not _AZURE_GUID.match(v):
            raise ValueError("must be a GUID like 00000000-0000-0000-0000-000000000000")
        return v.lower()

    @field_validator("location")
    @classmethod
    def _location(cls, v: str) -> str:
        return v.replace(" ", "").lower()


class SshSettings(_Strict):
    """SSH access to the nodes (amlCompute ssh_settings). Pass secrets as ${VAR}: they are never written out."""

    admin_username: Text | None = Field(None, description="administrator user on each node")
    admin_password: SecretStr | None = Field(None, description="secret: write ${VAR}, never the password itself")
    ssh_key_value: SecretStr | None = Field(None, description="SSH public key; write ${VAR} (e.g. ${SSH_PUBLIC_KEY})")


class NetworkSettings(_Strict):
    """Virtual network placement (amlCompute network_settings); changing it replaces the cluster."""

    vnet_name: Text | None = Field(None, description="virtual network name (with subnet as a name)")
    subnet: Text | None = Field(None, description="subnet name (with vnet_name) or full ARM id")


class UserAssignedIdentity(_Strict):
    """One user-assigned managed identity."""

    resource_id: Text = Field(description="ARM id of a user-assigned managed identity")


class Identity(_Strict):
    """Managed identity of the cluster (amlCompute identity)."""

    type: Annotated[Literal["system_assigned", "user_assigned", "system_assigned,user_assigned", "none"],
                    _enum_text(("SystemAssigned", "system_assigned"), ("UserAssigned", "user_assigned"),
                               ("SystemAssigned,UserAssigned", "system_assigned,user_assigned"))] = Field(
        description="which managed identities the nodes get (any case)")
    user_assigned_identities: list[UserAssignedIdentity] | None = Field(
        None, description="with type user_assigned: the identities, each {resource_id: ...}")


class Lifecycle(_Strict):
    """What plans may do to the resource."""

    prevent_destroy: bool = Field(False, description="refuse plans that delete or replace this cluster")


class Cluster(_Strict):
    """An Azure ML compute cluster; field names are amlCompute's in Azure ML CLI v2 YAML, so an `az ml compute`
    YAML file pastes in unchanged (its `$schema`, `name` and `type` included)."""

    schema_url: str | None = Field(None, alias="$schema", description="the amlCompute YAML schema; ignored "
                                   f"(pasted from an `az ml compute` file, e.g. {AML_COMPUTE_SCHEMA})")
    name: Text | None = Field(None, description="the Azure ML compute name; when given (a pasted compute YAML) it "
                              "must equal this cluster's key, which is always the name infra creates in Azure")
    type: Annotated[Literal["amlcompute"], _enum_text()] = Field(
        "amlcompute", description="only amlcompute clusters are managed (any case: AmlCompute)")
    size: Text = Field(AML_DEFAULT_SIZE, description="VM size, e.g. Standard_ND96asr_v4 (see `infra skus --infiniband`); "
                       f"default {AML_DEFAULT_SIZE}, Azure ML's default for a compute YAML without size")
    tier: Annotated[Literal["dedicated", "low_priority"], _enum_text(("lowpriority", "low_priority"))] = Field(
        "dedicated", description="VM priority, any case (Dedicated, low_priority, LowPriority); changing it "
        "replaces the cluster")
    min_instances: Count = Field(0, ge=0, le=_INT32_MAX, description="nodes kept running when idle (changes in place)")
    max_instances: Count = Field(1, ge=1, le=_INT32_MAX, description="most nodes the cluster scales to (changes in place)")
    idle_time_before_scale_down: Count = Field(120, ge=0, le=_INT32_MAX, description="seconds a node idles before it is released")
    enable_node_public_ip: bool = Field(True, description="give nodes public IPs; false needs a subnet with outbound access")
    ssh_public_access_enabled: bool | None = Field(None, description="open the SSH port of the nodes")
    ssh_settings: SshSettings | None = None
    network_settings: NetworkSettings | None = None
    identity: Identity | None = None
    location: Text | None = Field(None, description="region of the cluster; defaults to the workspace's")
    tags: dict[str, str] = Field(default_factory=dict, description="Azure tags (text values)")
    description: str | None = Field(None, description="free text shown in Azure ML studio")
    infiniband: Annotated[Literal["required", "optional"], _enum_text()] | None = Field(
        None, description="required: the size must give InfiniBand to NCCL/MPI; optional: allow sockets")
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)

    @model_validator(mode="after")
    def _scale(self) -> "Cluster":
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")
        return self


class Build(_Strict):
    """An image Azure ML builds: from one of our Dockerfile templates, or from your own build context."""

    template: Text | None = Field(None, description="a Dockerfile template from templates/docker/, e.g. openmpi-rdma")
    parameters: dict[str, Any] = Field(default_factory=dict, description="the template's parameters")
    path: Text | None = Field(None, description="a build context directory, relative to the stack file")
    dockerfile_path: Text = Field("Dockerfile", description="the Dockerfile inside the build context")

    @model_validator(mode="after")
    def _one_source(self) -> "Build":
        if (self.template is None) == (self.path is None):
            raise ValueError("build needs exactly one of `template` or `path`")
        return self


class Environment(_Strict):
    """A training environment: exactly one of `curated`, `image` or `build`."""

    curated: Text | None = Field(None, description="azureml:NAME@latest, azureml:NAME:VERSION or azureml://registries/...")
    image: Text | None = Field(None, description="a container image reference, e.g. myacr.azurecr.io/train:1.0")
    conda_file: Text | None = Field(None, description="with image: a conda YAML file, relative to the stack file")
    build: Build | None = None
    requires: list[str] = Field(default_factory=list, description="image requirement specs, e.g. openmpi>=4.1")
    version: Text | None = Field(None, description="environment version; default: derived from the content")
    tags: dict[str, str] = Field(default_factory=dict, description="Azure tags (text values)")
    description: str | None = Field(None, description="free text")
    os_type: Annotated[Literal["linux"], _enum_text()] = Field(
        "linux", description="only Linux images run distributed GPU training (any case: Linux)")

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        if isinstance(v, float):  # YAML reads 1.10 as 1.1: the text the user meant is already lost
            raise ValueError(f"write the version in quotes (version: \"{v}\"); YAML reads it as a number")
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("curated")
    @classmethod
    def _curated_reference(cls, v: str | None) -> str | None:
        if v is not None and not _CURATED_REFERENCE.match(v.strip()):
            raise ValueError(f"{v!r} is not a curated environment reference: write azureml:NAME@latest, "
                             "azureml:NAME:VERSION, AzureML-NAME@latest or "
                             "azureml://registries/REGISTRY/environments/NAME/versions/VERSION")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> "Environment":
        given = [k for k in ("curated", "image", "build") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("an environment needs exactly one of `curated`, `image` or `build`"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.conda_file is not None and self.image is None:
            raise ValueError("`conda_file` goes with `image` only")
        if self.curated is not None and self.version is not None:
            raise ValueError("a curated environment is referenced, not versioned: put the version in the reference")
        return self

    @property
    def kind(self) -> str:
        return "curated" if self.curated else "image" if self.image else "build"


class Smoke(_Strict):
    """The smoke-test job `infra apply` / `infra smoke` run to prove the distribution works."""

    enabled: bool = Field(True, description="run the smoke job after apply")
    busbw_fraction: float = Field(0.8, gt=0, le=1.0, description="fraction of the size's healthy busbw to pass")
    max_message_bytes: Count | None = Field(None, gt=0, le=1 << 34, description="largest all_reduce message; default: the size's")
    steps: Count = Field(5, ge=1, le=1000, description="timed all_reduce iterations per message size")
    timeout_minutes: Count = Field(30, ge=1, le=60 * 24 * 30, description="give up on the smoke job after this long")
    experiment_name: Text | None = Field(None, description="Azure ML experiment of the smoke job")


Framework = Annotated[Literal["ddp", "deepspeed", "horovod", "lightning", "transformers", "tensorflow"], _enum_text()]
DistributionType = Annotated[Literal["pytorch", "mpi", "tensorflow"], _enum_text()]


class JobDistribution(_Strict):
    """A command job's `distribution:` block, pasted unchanged; read into the flat fields beside it."""

    # Required by Azure ML's job schema; here it may also be the flat `type` beside the block.
    type: DistributionType | None = Field(None, description="Azure ML distribution type (any case: PyTorch, Mpi, "
                                          "TensorFlow); given here or as the distribution's flat type")
    process_count_per_instance: Count | None = Field(None, ge=1, le=_INT32_MAX, description="pytorch, mpi")
    worker_count: Count | None = Field(None, ge=1, le=_INT32_MAX, description="tensorflow")
    parameter_server_count: Count | None = Field(None, ge=0, le=_INT32_MAX, description="tensorflow")


class JobResources(_Strict):
    """A command job's `resources:` block, pasted unchanged; read into the flat fields beside it."""

    instance_count: Count = Field(1, ge=1, le=_INT32_MAX, description="nodes the job runs on")


# Where each key of the nested blocks lands in the flat form (the one rules and templates read).
NESTED_DISTRIBUTION_KEYS: dict[str, tuple[str, ...]] = {
    "distribution": tuple(JobDistribution.model_fields),
    "resources": tuple(JobResources.model_fields),
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


class Distribution(_Strict):
    """How a training job spreads over a cluster: the command job's `distribution` and `resources` fields, flat
    (type, instance_count, ...) or as the job's own `distribution:` and `resources:` blocks pasted unchanged."""

    cluster: Text = Field(description="name of a cluster in this stack")
    environment: Text = Field(description="name of an environment in this stack")
    type: DistributionType = Field(description="Azure ML distribution type (any case); or give distribution.type")
    instance_count: Count = Field(1, ge=1, le=_INT32_MAX, description="nodes the job runs on")
    process_count_per_instance: Count | None = Field(
        None, ge=1, le=_INT32_MAX, description="processes Azure ML starts per node (pytorch, mpi); one per GPU")
    worker_count: Count | None = Field(None, ge=1, le=_INT32_MAX, description="tensorflow: workers (default instance_count)")
    parameter_server_count: Count | None = Field(None, ge=0, le=_INT32_MAX, description="tensorflow: parameter servers")
    launcher: Annotated[Literal["per-process", "per-node"], _enum_text()] = Field(
        "per-process", description="per-process: Azure ML starts every process; per-node: a launcher started once "
                                   "per node does (torchrun, deepspeed, accelerate launch, Lightning). Derived from "
                                   "`command` and `framework` when not given; a declared one must agree")
    framework: Framework | None = Field(None, description="the training framework, for its launch rules")
    environment_variables: dict[str, str] = Field(default_factory=dict, description="set in every process")
    smoke: Smoke = Field(default_factory=Smoke)
    command: Text | None = Field(None, description="your own training command, rendered next to the smoke job")
    code: Text | None = Field(None, description="directory of your training code, relative to the stack file")
    distribution: JobDistribution | None = Field(
        None, description="a command job's distribution block, pasted as is; the same as the flat type, "
        "process_count_per_instance, worker_count, parameter_server_count (a value given both ways must agree)")
    resources: JobResources | None = Field(
        None, description="a command job's resources block, pasted as is; the same as the flat instance_count")

    @model_validator(mode="before")
    @classmethod
    def _nested_blocks(cls, data: Any) -> Any:
        """Read pasted blocks into the flat fields (the loader does this first, with positions)."""
        if not isinstance(data, dict):
            return data
        flat, _, conflicts = flatten_distribution(data)
        if conflicts:
            block, key = conflicts[0]
            raise ValueError(f"{block}.{key} and {key} disagree ({data[block][key]!r} vs {data[key]!r})")
        return flat

    @field_validator("environment_variables", mode="before")
    @classmethod
    def _env_text(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (str(x).lower() if isinstance(x, bool) else str(x) if isinstance(x, (int, float)) else x)
                    for k, x in v.items()}
        return v

    @model_validator(mode="after")
    def _derive_launcher(self) -> "Distribution":
        # The command says how processes start (torchrun ... is per-node); a declared `launcher` is kept as
        # written so `infra validate` can report where it disagrees with the command.
        if "launcher" not in self.model_fields_set:
            try:
                derived = derived_launcher(self.command, self.framework)
            except (OSError, LookupError, TypeError, ValueError):  # a broken validators/: the rules report it
                derived = None
            if derived is not None:
                self.__dict__["launcher"] = derived  # frozen model: set once, while it is being built
        return self

    @property
    def processes_per_instance(self) -> int:
        return self.process_count_per_instance or 1


class Stack(_Strict):
    """An infra stack file: Azure ML clusters, environments and distributions, planned and applied together."""

    stack: str = Field(description="the stack's name; written as a tag on everything it creates",
                       pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    workspace: Workspace
    clusters: dict[str, Cluster] = Field(default_factory=dict, description="compute clusters by name")
    environments: dict[str, Environment] = Field(default_factory=dict, description="environments by name")
    distributions: dict[str, Distribution] = Field(
        default_factory=dict, description="distributed jobs (each gets a smoke test) by name")

    @field_validator("clusters", "environments", "distributions", mode="before")
    @classmethod
    def _empty_section(cls, v: Any) -> Any:
        return {} if v is None else v  # `clusters:` with nothing under it means none


# https://docs.pydantic.dev/latest/concepts/plugins/#how-to-disable-a-plugin
_NO_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


def _build_validators(*models: type[BaseModel]) -> None:
    """Build the validators now, with pydantic's plugin discovery off: it reads the entry points of every
    installed distribution (~10 ms of each `infra validate`) for plugins that would observe these models, and
    the stack model has no use for any. Typer turns it off the same way for its own TypeAdapters."""
    saved = os.environ.get(_NO_PLUGINS)
    os.environ[_NO_PLUGINS] = "1"
    try:
        for model in models:
            model.model_rebuild(force=True)
    finally:
        if saved is None:
            os.environ.pop(_NO_PLUGINS, None)
        else:
            os.environ[_NO_PLUGINS] = saved


# Stack validates every stack file; Smoke and Lifecycle are built by its default factories.
_build_validators(Stack, Smoke, Lifecycle)
