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
    subscription_id: str = Field(description="Azure subscription id (a GUID)")
    resource_group: str
    name: str
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
    admin_username: str | None = None
    admin_password: SecretStr | None = None
    ssh_key_value: SecretStr | None = None


class NetworkSettings(_Strict):
    vnet_name: str | None = None
    subnet: str | None = Field(None, description="subnet name (with vnet_name) or full ARM id")


class UserAssignedIdentity(_Strict):
    resource_id: str


class Identity(_Strict):
    type: Literal["system_assigned", "user_assigned", "system_assigned,user_assigned", "none"]
    user_assigned_identities: list[UserAssignedIdentity] | None = None


class Lifecycle(_Strict):
    prevent_destroy: bool = False


class Cluster(_Strict):
    type: Literal["amlcompute"] = "amlcompute"
    size: str = Field(description="VM size, e.g. Standard_ND96asr_v4")
    tier: Literal["dedicated", "low_priority"] = "dedicated"
    min_instances: int = Field(0, ge=0)
    max_instances: int = Field(1, ge=1)
    idle_time_before_scale_down: int = Field(120, ge=0, description="seconds")
    enable_node_public_ip: bool = True
    ssh_public_access_enabled: bool | None = None
    ssh_settings: SshSettings | None = None
    network_settings: NetworkSettings | None = None
    identity: Identity | None = None
    location: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    infiniband: Literal["required", "optional"] | None = Field(
        None, description="required: the size must give InfiniBand to NCCL/MPI; optional: allow sockets")
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)

    @model_validator(mode="after")
    def _scale(self) -> "Cluster":
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")
        return self


class Build(_Strict):
    template: str | None = Field(None, description="a Dockerfile template from templates/")
    parameters: dict[str, Any] = Field(default_factory=dict)
    path: str | None = Field(None, description="a build context directory, relative to the stack file")
    dockerfile_path: str = "Dockerfile"

    @model_validator(mode="after")
    def _one_source(self) -> "Build":
        if (self.template is None) == (self.path is None):
            raise ValueError("build needs exactly one of `template` or `path`")
        return self


class Environment(_Strict):
    curated: str | None = Field(None, description="azureml:NAME@latest, azureml:NAME:VERSION or azureml://registries/...")
    image: str | None = None
    conda_file: str | None = Field(None, description="path relative to the stack file")
    build: Build | None = None
    requires: list[str] = Field(default_factory=list, description="image requirement specs, e.g. openmpi>=4.1")
    version: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    os_type: Literal["linux"] = "linux"

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v

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
    enabled: bool = True
    busbw_fraction: float = Field(0.8, gt=0, le=2.0, description="fraction of the size's healthy busbw to pass")
    max_message_bytes: int | None = Field(None, gt=0)
    steps: int = Field(5, ge=1, le=1000)
    timeout_minutes: int = Field(30, ge=1)
    experiment_name: str | None = None


Framework = Literal["ddp", "deepspeed", "horovod", "lightning", "transformers", "tensorflow"]


class Distribution(_Strict):
    cluster: str
    environment: str
    type: Literal["pytorch", "mpi", "tensorflow"]
    instance_count: int = Field(1, ge=1)
    process_count_per_instance: int | None = Field(None, ge=1)
    worker_count: int | None = Field(None, ge=1)
    parameter_server_count: int | None = Field(None, ge=0)
    launcher: Literal["per-process", "per-node"] = "per-process"
    framework: Framework | None = None
    environment_variables: dict[str, str] = Field(default_factory=dict)
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
    stack: str = Field(description="the stack's name; written as a tag on everything it creates",
                       pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    workspace: Workspace
    clusters: dict[str, Cluster] = Field(default_factory=dict)
    environments: dict[str, Environment] = Field(default_factory=dict)
    distributions: dict[str, Distribution] = Field(default_factory=dict)
