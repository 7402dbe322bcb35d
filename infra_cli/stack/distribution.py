"""A distribution of the stack (`distributions:`): how a training job spreads over a cluster, a compute infra does
not manage or serverless compute: the command job's `distribution` and `resources` fields, flat or as the job's own
blocks pasted unchanged, and the smoke job that proves it works."""

from __future__ import annotations

import re
from typing import Any

from infra_cli.stack.common_kinds import INT32_MAX, Count, FreeText, PathText, Secretive, SecretiveText, Text
from infra_cli.stack.fields import Field, Model
from infra_cli.stack.launch import launcher_for as derived_launcher
from infra_cli.stack.value_kinds import ANY, Bool, DictOf, Float, ListOf, OneOf, Str


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
    process_count_per_instance = Field(Count | None, None, ge=1, le=INT32_MAX, description="pytorch, mpi")
    worker_count = Field(Count | None, None, ge=1, le=INT32_MAX, description="tensorflow")
    parameter_server_count = Field(Count | None, None, ge=0, le=INT32_MAX, description="tensorflow")
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

    instance_count = Field(Count | None, None, ge=1, le=INT32_MAX, description="nodes the job runs on (the flat "
                           "instance_count)")
    instance_type = Field(Text | None, None, description="instance type (Kubernetes or serverless compute)")
    shm_size = Field(Str(pattern=r"^[0-9]+[bkmgBKMG]?$") | None, None, after=_shm_size,
                     description="size of the container's /dev/shm, e.g. 3g (Docker's --shm-size)")
    docker_args = Field(ANY | None, None, after=_docker_args,
                        description="extra arguments to the container's docker run (text or a list of texts)")
    properties = Field(DictOf(ANY), factory=dict, description="properties of the job's resources")
    locations = Field(ListOf(Text), factory=list, description="regions the job may run in")
    max_instance_count = Field(Count | None, None, ge=1, le=INT32_MAX, description="most nodes (elastic training)")


class JobLimits(Model):
    """A command job's `limits:` block."""

    timeout = Field(Count | None, None, ge=1, le=INT32_MAX, description="seconds before Azure ML cancels the job")


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
    instance_count = Field(Count, 1, ge=1, le=INT32_MAX, description="nodes the job runs on")
    process_count_per_instance = Field(
        Count | None, None, ge=1, le=INT32_MAX, description="processes Azure ML starts per node (pytorch, mpi); one per GPU")
    worker_count = Field(Count | None, None, ge=1, le=INT32_MAX,
                         description="tensorflow: workers (default instance_count)")
    parameter_server_count = Field(Count | None, None, ge=0, le=INT32_MAX, description="tensorflow: parameter servers")
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
