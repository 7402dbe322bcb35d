"""The stack model. Field names are Azure ML CLI v2 YAML's (amlCompute, environment, command job), so a
user's compute.yml pastes into a stack; our additions are `infiniband`, `lifecycle`, `requires`, `smoke`.

The model checks shapes and types only; knowledge-based rules (InfiniBand, GPUs, MPI) live in validate/.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

_AZURE_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Workspace(_Strict):
    """The Azure ML workspace every resource of the stack lives in."""

    subscription_id: str = Field(description="Azure subscription id (a GUID)")
    resource_group: str = Field(description="resource group of the workspace")
    name: str = Field(description="workspace name")
    location: str = Field(description="Azure region of the workspace, e.g. eastus")

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

    admin_username: str | None = Field(None, description="administrator user on each node")
    admin_password: SecretStr | None = Field(None, description="secret: write ${VAR}, never the password itself")
    ssh_key_value: SecretStr | None = Field(None, description="SSH public key; write ${VAR} (e.g. ${SSH_PUBLIC_KEY})")


class NetworkSettings(_Strict):
    """Virtual network placement (amlCompute network_settings); changing it replaces the cluster."""

    vnet_name: str | None = Field(None, description="virtual network name (with subnet as a name)")
    subnet: str | None = Field(None, description="subnet name (with vnet_name) or full ARM id")


class UserAssignedIdentity(_Strict):
    """One user-assigned managed identity."""

    resource_id: str = Field(description="ARM id of a user-assigned managed identity")


class Identity(_Strict):
    """Managed identity of the cluster (amlCompute identity)."""

    type: Literal["system_assigned", "user_assigned", "system_assigned,user_assigned", "none"] = Field(
        description="which managed identities the nodes get")
    user_assigned_identities: list[UserAssignedIdentity] | None = Field(
        None, description="with type user_assigned: the identities, each {resource_id: ...}")


class Lifecycle(_Strict):
    """What plans may do to the resource."""

    prevent_destroy: bool = Field(False, description="refuse plans that delete or replace this cluster")


class Cluster(_Strict):
    """An Azure ML compute cluster; field names are amlCompute's in Azure ML CLI v2 YAML."""

    type: Literal["amlcompute"] = Field("amlcompute", description="only amlcompute clusters are managed")
    size: str = Field(description="VM size, e.g. Standard_ND96asr_v4 (see `infra skus --infiniband`)")
    tier: Literal["dedicated", "low_priority"] = Field("dedicated", description="VM priority; changing it replaces the cluster")
    min_instances: int = Field(0, ge=0, description="nodes kept running when idle (changes in place)")
    max_instances: int = Field(1, ge=1, description="most nodes the cluster scales to (changes in place)")
    idle_time_before_scale_down: int = Field(120, ge=0, description="seconds a node idles before it is released")
    enable_node_public_ip: bool = Field(True, description="give nodes public IPs; false needs a subnet with outbound access")
    ssh_public_access_enabled: bool | None = Field(None, description="open the SSH port of the nodes")
    ssh_settings: SshSettings | None = None
    network_settings: NetworkSettings | None = None
    identity: Identity | None = None
    location: str | None = Field(None, description="region of the cluster; defaults to the workspace's")
    tags: dict[str, str] = Field(default_factory=dict, description="Azure tags (text values)")
    description: str | None = Field(None, description="free text shown in Azure ML studio")
    infiniband: Literal["required", "optional"] | None = Field(
        None, description="required: the size must give InfiniBand to NCCL/MPI; optional: allow sockets")
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)

    @model_validator(mode="after")
    def _scale(self) -> "Cluster":
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")
        return self


class Build(_Strict):
    """An image Azure ML builds: from one of our Dockerfile templates, or from your own build context."""

    template: str | None = Field(None, description="a Dockerfile template from templates/docker/, e.g. openmpi-rdma")
    parameters: dict[str, Any] = Field(default_factory=dict, description="the template's parameters")
    path: str | None = Field(None, description="a build context directory, relative to the stack file")
    dockerfile_path: str = Field("Dockerfile", description="the Dockerfile inside the build context")

    @model_validator(mode="after")
    def _one_source(self) -> "Build":
        if (self.template is None) == (self.path is None):
            raise ValueError("build needs exactly one of `template` or `path`")
        return self


class Environment(_Strict):
    """A training environment: exactly one of `curated`, `image` or `build`."""

    curated: str | None = Field(None, description="azureml:NAME@latest, azureml:NAME:VERSION or azureml://registries/...")
    image: str | None = Field(None, description="a container image reference, e.g. myacr.azurecr.io/train:1.0")
    conda_file: str | None = Field(None, description="with image: a conda YAML file, relative to the stack file")
    build: Build | None = None
    requires: list[str] = Field(default_factory=list, description="image requirement specs, e.g. openmpi>=4.1")
    version: str | None = Field(None, description="environment version; default: derived from the content")
    tags: dict[str, str] = Field(default_factory=dict, description="Azure tags (text values)")
    description: str | None = Field(None, description="free text")
    os_type: Literal["linux"] = Field("linux", description="only Linux images run distributed GPU training")

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        if isinstance(v, float):  # YAML reads 1.10 as 1.1: the text the user meant is already lost
            raise ValueError(f"write the version in quotes (version: \"{v}\"); YAML reads it as a number")
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

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
    busbw_fraction: float = Field(0.8, gt=0, le=2.0, description="fraction of the size's healthy busbw to pass")
    max_message_bytes: int | None = Field(None, gt=0, description="largest all_reduce message; default: the size's")
    steps: int = Field(5, ge=1, le=1000, description="timed all_reduce iterations per message size")
    timeout_minutes: int = Field(30, ge=1, description="give up on the smoke job after this long")
    experiment_name: str | None = Field(None, description="Azure ML experiment of the smoke job")


Framework = Literal["ddp", "deepspeed", "horovod", "lightning", "transformers", "tensorflow"]


class Distribution(_Strict):
    """How a training job spreads over a cluster (command job `distribution` and `resources`)."""

    cluster: str = Field(description="name of a cluster in this stack")
    environment: str = Field(description="name of an environment in this stack")
    type: Literal["pytorch", "mpi", "tensorflow"] = Field(description="Azure ML distribution type")
    instance_count: int = Field(1, ge=1, description="nodes the job runs on")
    process_count_per_instance: int | None = Field(
        None, ge=1, description="processes Azure ML starts per node (pytorch, mpi); one per GPU")
    worker_count: int | None = Field(None, ge=1, description="tensorflow: workers (default instance_count)")
    parameter_server_count: int | None = Field(None, ge=0, description="tensorflow: parameter servers")
    launcher: Literal["per-process", "per-node"] = Field(
        "per-process", description="per-process: Azure ML starts every process; per-node: torchrun/Lightning do")
    framework: Framework | None = Field(None, description="the training framework, for its launch rules")
    environment_variables: dict[str, str] = Field(default_factory=dict, description="set in every process")
    smoke: Smoke = Field(default_factory=Smoke)
    command: str | None = Field(None, description="your own training command, rendered next to the smoke job")
    code: str | None = Field(None, description="directory of your training code, relative to the stack file")

    @field_validator("environment_variables", mode="before")
    @classmethod
    def _env_text(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (str(x).lower() if isinstance(x, bool) else str(x) if isinstance(x, (int, float)) else x)
                    for k, x in v.items()}
        return v

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
