"""What an Azure ML command job of a distribution is, as data: the smoke job and the user's training job.

Built once per distribution from the stack and the catalog, then rendered two ways from the same spec:
CLI v2 YAML (render.py, for `az ml job create -f`) and the SDK's `command(...)` (sdk.py). Every shell
argument goes through shlex.quote; environment variables never pass through a shell.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from infra_cli.arguments import NextStep
from infra_cli.knowledge.frameworks import frameworks, smoke_script_imports
from infra_cli.knowledge.job_schema import job_schema
from infra_cli.knowledge.skus import Catalog, Sku
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says
from infra_cli.conventions import TAG_ADDRESS, TAG_STACK
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import Distribution
from infra_cli.stack.secret import Secret

DDP_SCRIPT = "ddp_smoke.py"
TF_SCRIPT = "tf_smoke.py"
RAY_SCRIPT = "ray_smoke.py"   # a ray distribution's: joins the job's Ray cluster, a task on every node
# Run first by every smoke job's command, with the job's own python: the modules the smoke imports and the
# launcher it starts are there, or the job ends at once (templates/smoke/preflight.py.j2)
PREFLIGHT_SCRIPT = "preflight.py"
PER_NODE_LAUNCHER = "torchrun"   # the smoke's per-node launcher (validators/launchers.yaml: torchrun)
# Frameworks the DDP smoke script initialises for real (templates/smoke/_frameworks.py.j2); others run plain DDP.
SMOKED_FRAMEWORKS = ("ddp", "lightning", "transformers", "deepspeed", "horovod")
OUTPUTS_DIR = "outputs"  # Azure ML uploads ./outputs of every node
RESULT_FILE = "smoke-result.json"  # what the smoke scripts write under OUTPUTS_DIR
# Azure ML's PyTorch distribution sets these on every node; the per-node launcher reads them in the shell.
_PER_NODE_RENDEZVOUS = ["--node_rank", "$NODE_RANK", "--master_addr", "$MASTER_ADDR", "--master_port", "$MASTER_PORT"]
# An MPI job with one process per node (the guides' per-node launch under MPI): the node's rank is
# OMPI_COMM_WORLD_RANK (OMPI_COMM_WORLD_NODE_RANK is not), the master is AZ_BATCH_MASTER_NODE ("addr:port",
# several nodes) or AZ_BATCHAI_MPI_MASTER_NODE (one node, Azure ML's port 6105).
_MPI_PER_NODE_MASTER = 'master="${AZ_BATCH_MASTER_NODE:-${AZ_BATCHAI_MPI_MASTER_NODE}:6105}" &&'
_MPI_PER_NODE_RENDEZVOUS = ["--node_rank", "$OMPI_COMM_WORLD_RANK", "--master_addr", '"${master%:*}"',
                            "--master_port", '"${master##*:}"']


@dataclass(frozen=True)
class CommandJobSpec:
    """An Azure ML command job (CLI v2 field names)."""

    address: str
    command: str
    code: str | None
    environment: str
    compute: str | None   # None: serverless compute (the job names none; resources.instance_type its size)
    instance_count: int
    distribution: dict[str, Any]
    environment_variables: dict[str, str]
    experiment_name: str
    display_name: str
    description: str
    timeout_s: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # The distribution's own command job keys (inputs, outputs, services, ...) and resources keys (shm_size,
    # docker_args, ...), written as the stack gives them: validators/job_schema.yaml lists which these are.
    job_fields: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SmokeJob:
    """The smoke job of one distribution: its spec and which script it runs."""

    name: str
    spec: CommandJobSpec
    script: str
    sku: Sku | None


def safe_name(text: str) -> str:
    """A name usable as a directory and as an Azure ML experiment name (letters, digits, - _ .)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "unnamed"
    return slug[:200]


def quote_command(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def environment_reference(loaded: LoadedStack, key: str) -> str:
    env = loaded.stack.environments[key]
    if env.curated:
        return env.curated if env.curated.startswith("azureml:") else f"azureml:{env.curated}"
    # Environments the tool registers carry the stack's key as their Azure ML name.
    return f"azureml:{key}@latest"


def processes_per_node(dist: Distribution, sku: Sku | None) -> int:
    """Per-node launchers start one process per GPU unless the stack says how many."""
    if dist.process_count_per_instance:
        return dist.process_count_per_instance
    if dist.launcher == "per-node" and sku is not None and sku.gpus:
        return sku.gpus
    return 1


def _distribution_block(dist: Distribution, per_node: int) -> dict[str, Any]:
    """The job's `distribution:` block; empty for a job without a distribution type (none is written)."""
    if dist.type is None:
        return {}
    if dist.type == "ray":
        return {"type": "ray", **dist.ray}
    if dist.type == "tensorflow":
        block: dict[str, Any] = {"type": "tensorflow", "worker_count": dist.worker_count or dist.instance_count}
        if dist.parameter_server_count is not None:
            block["parameter_server_count"] = dist.parameter_server_count
        return block
    # A per-node launcher is started once per node; it starts the per-node processes itself.
    return {"type": dist.type, "process_count_per_instance": 1 if dist.launcher == "per-node" else per_node}


def _smoke_argv(name: str, dist: Distribution, per_node: int, sku: Sku | None = None) -> tuple[str, list[str]]:
    if dist.type == "ray":
        return RAY_SCRIPT, ["python", RAY_SCRIPT, "--label", name, "--instance-count", str(dist.instance_count),
                            "--gpus-per-node", str(sku.gpus if sku else 0), "--outputs", OUTPUTS_DIR,
                            "--timeout-s", str(dist.smoke.timeout_minutes * 60)]
    if dist.type == "tensorflow":
        return TF_SCRIPT, ["python", TF_SCRIPT, "--label", name,
                           "--worker-count", str(dist.worker_count or dist.instance_count),
                           "--parameter-server-count", str(dist.parameter_server_count or 0),
                           "--outputs", OUTPUTS_DIR]
    script_args = [DDP_SCRIPT, "--label", name, "--instance-count", str(dist.instance_count),
                   "--processes-per-instance", str(per_node), "--steps", str(dist.smoke.steps),
                   "--outputs", OUTPUTS_DIR, "--timeout-s", str(dist.smoke.timeout_minutes * 60),
                   "--framework", dist.framework if dist.framework in SMOKED_FRAMEWORKS else "ddp"]
    if dist.smoke.max_message_bytes:
        script_args += ["--max-bytes", str(dist.smoke.max_message_bytes)]
    return DDP_SCRIPT, ["python", *script_args]


def preflight_argv(script: str, dist: Distribution, launcher: str | None) -> list[str]:
    """`python preflight.py ...`: the modules `script` imports (validators/frameworks.yaml smoke_scripts), the
    framework's (its `imports`, for the frameworks the DDP smoke initialises) and the per-node launcher."""
    argv = ["python", PREFLIGHT_SCRIPT]
    needs = smoke_script_imports(script)
    for module in needs:
        argv += ["--module", module]
    info = frameworks().get(dist.framework) if script == DDP_SCRIPT and dist.framework in SMOKED_FRAMEWORKS else None
    own = [m for m in (info.imports if info else ()) if m not in needs]
    if own:
        argv += ["--framework", f"{dist.framework}={','.join(own)}"]
    if launcher:
        argv += ["--launcher", launcher]
    return argv + ["--outputs", OUTPUTS_DIR]


def _smoke_command(name: str, dist: Distribution, per_node: int, sku: Sku | None = None) -> tuple[str, str]:
    script, argv = _smoke_argv(name, dist, per_node, sku)
    per_node_launch = dist.launcher == "per-node" and dist.type in ("pytorch", "mpi", None)
    # The preflight ends the job before any launcher or rank starts when the job's python lacks what they need.
    preflight = quote_command(preflight_argv(script, dist, PER_NODE_LAUNCHER if per_node_launch else None)) + " &&"
    if per_node_launch:
        launcher = [PER_NODE_LAUNCHER, "--nnodes", str(dist.instance_count), "--nproc_per_node", str(per_node)]
        # The rendezvous variables are ours and must reach the shell unquoted; everything else is quoted.
        if dist.type is None:   # no distribution: one node, and no rendezvous variables from Azure ML
            return script, " ".join([preflight, quote_command([PER_NODE_LAUNCHER, "--standalone", *launcher[1:]]),
                                     quote_command(argv[1:])])
        if dist.type == "mpi":
            return script, " ".join([preflight, _MPI_PER_NODE_MASTER, quote_command(launcher),
                                     *_MPI_PER_NODE_RENDEZVOUS, quote_command(argv[1:])])
        return script, " ".join([preflight, quote_command(launcher), *_PER_NODE_RENDEZVOUS, quote_command(argv[1:])])
    return script, " ".join([preflight, quote_command(argv)])


def job_environment(sku: Sku | None, dist: Distribution, debug_env: dict[str, str] | None) -> dict[str, str]:
    """The size's recommended NCCL settings, then NCCL debug output (smoke only), then the stack's own."""
    env = dict(sku.nccl_env) if sku else {}
    env.update(debug_env or {})
    env.update(dist.environment_variables)
    return env


def _common(loaded: LoadedStack, name: str, catalog: Catalog) -> tuple[Distribution, Sku | None]:
    stack = loaded.stack
    if name not in stack.distributions:
        known = ", ".join(sorted(stack.distributions)) or "(none)"
        raise DiagnosticError([Diagnostic("error", "smoke.unknown-distribution",
                                          f"no distribution {name!r} in stack {stack.stack}", loaded.file,
                                          None, None, f"pick one of: {known}")])
    dist = stack.distributions[name]
    if (dist.cluster is not None and dist.cluster not in stack.clusters) or dist.environment not in stack.environments:
        raise DiagnosticError([loaded.source.diagnostic(
            ("distributions", name), "smoke.unresolved",
            f"distribution {name!r} names a cluster or environment the stack does not define",
            says("run ", NextStep(("infra", "validate")), " and fix the references first"))])
    size = stack.size_of(dist)   # a cluster's size, a serverless instance_type; None for a compute read live
    return dist, catalog.get(size) if size is not None else None


def smoke_job(loaded: LoadedStack, name: str, catalog: Catalog, debug_env: dict[str, str]) -> SmokeJob:
    dist, sku = _common(loaded, name, catalog)
    per_node = processes_per_node(dist, sku)
    script, command = _smoke_command(name, dist, per_node, sku)
    stack = loaded.stack.stack
    spec = CommandJobSpec(
        address=f"smoke.{name}",
        command=command,
        code=".",
        environment=environment_reference(loaded, dist.environment),
        compute=loaded.stack.compute_of(dist),
        instance_count=dist.instance_count,
        distribution=_distribution_block(dist, per_node),
        environment_variables=job_environment(sku, dist, debug_env),
        experiment_name=safe_name(dist.smoke.experiment_name or f"infra-smoke-{stack}"),
        display_name=f"smoke {stack}/{name}",
        description=f"infra smoke test of distribution {name!r}: " + (
            "Ray's nodes, the GPUs it sees on each, a task on every node" if dist.type == "ray" else
            "ranks, DDP replicas, all_reduce busbw, NCCL transport"),
        timeout_s=dist.smoke.timeout_minutes * 60,
        tags={TAG_STACK: stack, TAG_ADDRESS: f"smoke.{name}"},
        **_serverless_fields(dist),
    )
    return SmokeJob(name, spec, script, sku)


def _serverless_fields(dist: Distribution) -> dict[str, Any]:
    """What a smoke job on serverless compute carries of its distribution: the size (resources.instance_type) and
    queue_settings (its tier), as the training job does; nothing for a job on a cluster or a named compute."""
    if dist.runs_on != "serverless":
        return {}
    fields, resources = pasted_job_fields(dist)
    return {"resources": {k: v for k, v in resources.items() if k == "instance_type"},
            "job_fields": {k: v for k, v in fields.items() if k == "queue_settings"}}


def training_job(loaded: LoadedStack, name: str, catalog: Catalog, code: str | None) -> CommandJobSpec | None:
    """The user's own training job (when the distribution has a `command`), `code` relative to the YAML."""
    dist, sku = _common(loaded, name, catalog)
    if not dist.command:
        return None
    stack = loaded.stack.stack
    job_fields, resources = pasted_job_fields(dist)
    return CommandJobSpec(
        address=f"job.{name}",
        command=dist.command,  # the user's own shell command, passed through as written
        code=code,
        environment=environment_reference(loaded, dist.environment),
        compute=loaded.stack.compute_of(dist),
        instance_count=dist.instance_count,
        distribution=_distribution_block(dist, processes_per_node(dist, sku)),
        environment_variables=job_environment(sku, dist, None),
        experiment_name=dist.experiment_name or safe_name(f"{stack}-{name}"),
        display_name=dist.display_name or f"{stack}/{name}",
        description=dist.description if dist.description is not None else
        f"training job of distribution {name!r} (stack {stack})",
        timeout_s=dist.limits.timeout if dist.limits is not None else None,
        tags={**dist.tags, TAG_STACK: stack, TAG_ADDRESS: f"job.{name}"},
        job_fields=job_fields,
        resources=resources,
    )


# Command job keys the spec writes itself (or, for the nested blocks, from their flat fields).
_SPEC_KEYS = ("$schema", "type", "name", "code", "command", "compute", "environment", "distribution", "resources",
              "environment_variables", "experiment_name", "display_name", "description", "limits", "tags")


def _json_data(model: Any) -> dict[str, Any]:
    """The model as JSON data (a YAML date is its ISO text), each sensitive value still the Secret it is (a writer
    shows it redacted; `infra render --write-secrets` reveals it)."""
    return _keeping_secrets(model.model_dump(exclude_none=True), model.model_dump(mode="json", exclude_none=True))


def _keeping_secrets(python: Any, data: Any) -> Any:
    if isinstance(python, Secret):
        return python
    if isinstance(python, dict) and isinstance(data, dict):
        return {k: _keeping_secrets(python.get(k), v) for k, v in data.items()}
    if isinstance(python, (list, tuple)) and isinstance(data, list) and len(python) == len(data):
        return [_keeping_secrets(p, d) for p, d in zip(python, data)]
    return data


def pasted_job_fields(dist: Distribution) -> tuple[dict[str, Any], dict[str, Any]]:
    """The distribution's other command job keys (validators/job_schema.yaml `command_job`: inputs, outputs,
    services, queue_settings, identity, properties) and its resources keys beside instance_count (`resources`:
    shm_size, docker_args, instance_type, ...), as plain data for the job file, only those it sets."""
    schema = job_schema()
    given = _json_data(dist)
    fields = {key: given[key] for key in schema.command_job
              if key not in _SPEC_KEYS and key in Distribution.model_fields and given.get(key) not in (None, {}, [])}
    block = _json_data(dist.resources) if dist.resources is not None else {}
    resources = {key: block[key] for key in schema.resources
                 if key != "instance_count" and block.get(key) not in (None, {}, [])}
    return fields, resources
