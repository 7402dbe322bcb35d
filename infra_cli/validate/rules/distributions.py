"""Rules on each distribution: its job's bindings, inputs, services and identity, the cluster and environment
it names, InfiniBand between its nodes, its GPUs and instances, and what its framework needs the environment to
carry (MPI, packages)."""

from __future__ import annotations

import difflib
import posixpath
import re
from typing import Iterator

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, says
from infra_cli.knowledge.curated import curated_info, image_info
from infra_cli.knowledge.frameworks import FrameworkInfo, frameworks, types_needing_mpi
from infra_cli.knowledge.job_schema import job_schema
from infra_cli.knowledge.size_name import parse_size_name
from infra_cli.paths import project_root
from infra_cli.stack.model import Distribution
from infra_cli.stack.secret import Secret
from infra_cli.stack.source import short_repr
from infra_cli.validate.job_inputs import input_problem
from infra_cli.validate.rules.carries import environment_carries
from infra_cli.validate.rules.command import diagnostic_at_command, launched_per_node
from infra_cli.validate.rules.registry import Context, declare, rule_for_each
from infra_cli.validate.rules.size_advice import ib_reason, ib_sizes_for, judged_by_name


# A command job's expression bindings: ${{inputs.NAME}} and ${{outputs.NAME}}
# (https://learn.microsoft.com/azure/machine-learning/reference-yaml-job-command#expression-syntax-for-configuring-azure-ml-job-inputs-and-outputs).
_JOB_BINDING = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z0-9_.-]*?)\s*\}\}")


JOB_BINDING = declare("distribution.job-binding", "error",
                      "the command names ${{inputs.X}} or ${{outputs.X}} the distribution does not declare")


@rule_for_each("distributions", JOB_BINDING)
def distribution_job_bindings(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """Each ${{inputs.NAME}} / ${{outputs.NAME}} in the command names an input or output the distribution
    declares: azure-ai-ml refuses the job otherwise ("Inputs to job does not contain 'NAME'")."""
    for m in _JOB_BINDING.finditer(dist.command or ""):
        kind, key = m.groups()
        declared = dist.inputs if kind == "inputs" else dist.outputs
        if key in declared:
            continue
        close = difflib.get_close_matches(key, list(declared), n=1, cutoff=0.6)
        listed = ", ".join(sorted(declared)) or "none"
        yield diagnostic_at_command(
            ctx, name, JOB_BINDING.id,
            f"the command of distribution {name!r} names ${{{{{kind}.{key}}}}}, but its {kind} declare no "
            f"{key!r} (declared: {listed}); Azure ML refuses the job",
            (f"did you mean ${{{{{kind}.{close[0]}}}}}? " if close else "")
            + f"declare it under `{kind}:` in the distribution (as in the job's YAML: {kind}: {{{key}: VALUE}})")


# ${inputs.NAME} / ${outputs.NAME} with one pair of braces (not preceded by a second `{`): what a Python f-string
# leaves of ${{inputs.NAME}}, or a stack's `$${inputs.NAME}`. Azure ML binds only the two-brace form.
_SINGLE_BRACE = re.compile(r"(?<!\{)\$\{(?!\{)\s*(inputs|outputs)\.([A-Za-z0-9_.-]+?)\s*\}(?!\})")


BINDING_SINGLE_BRACES = declare(
    "distribution.binding-single-braces", "error",
    "the command writes ${inputs.X} (one pair of braces): Azure ML passes it literally and bash stops on it")
BINDING_IN_VARIABLES = declare(
    "distribution.binding-in-variables", "error",
    "an environment variable's value is ${{inputs.X}}: Azure ML binds only the command, the variable keeps the text")
BINDING_UNUSED = declare("distribution.binding-unused", "warning",
                         "a declared input or output the command never names")


@rule_for_each("distributions", BINDING_SINGLE_BRACES, BINDING_IN_VARIABLES, BINDING_UNUSED)
def distribution_bindings_unbound(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """What Azure ML does not bind: ${inputs.X} with one pair of braces in the command (passed as written, and bash
    says "bad substitution"), ${{inputs.X}} in an environment variable's value (Azure ML binds the command only: the
    variable holds the text), and a declared input or output the command never names (a warning)."""
    command = dist.command or ""
    for m in _SINGLE_BRACE.finditer(command):
        kind, key = m.groups()
        yield diagnostic_at_command(
            ctx, name, BINDING_SINGLE_BRACES.id,
            f"the command of distribution {name!r} writes {m.group(0)} with one pair of braces: Azure ML binds only "
            f"${{{{{kind}.{key}}}}}, passes this as written, and bash stops on it (\"bad substitution\")",
            f"write ${{{{{kind}.{key}}}}} (two pairs of braces; a Python f-string needs ${{{{{{{{{kind}.{key}}}}}}}}} "
            "to write them); in a stack file `${{...}}` is written as is, and `$${...}` is the escape for a literal ${")
    for var, value in dist.environment_variables.items():
        bound = None if isinstance(value, Secret) else _JOB_BINDING.search(str(value))   # a secret is never quoted
        if bound:
            yield ctx.at(("distributions", name, "environment_variables", var), BINDING_IN_VARIABLES.id,
                         f"environment variable {var} of distribution {name!r} is {bound.group(0)}: Azure ML binds "
                         "inputs and outputs in the command only, so the variable holds that text, not the path",
                         f"pass it in the command instead: `command: {var}={bound.group(0)} python ...` or as an argument "
                         f"(`--{bound.group(2)} {bound.group(0)}`)")
    if not command:
        return
    # named in any form: the two rules above already speak of one named wrongly
    named = {(k, key) for k, key in _JOB_BINDING.findall(command) + _SINGLE_BRACE.findall(command)}
    named |= {(k, key) for v in dist.environment_variables.values() if not isinstance(v, Secret)
              for k, key in _JOB_BINDING.findall(str(v))}
    for kind, declared in (("inputs", dist.inputs), ("outputs", dist.outputs)):
        for key in declared:
            if (kind, key) not in named:
                yield ctx.warning(("distributions", name, kind, key), BINDING_UNUSED.id,
                                  f"{kind[:-1]} {key!r} of distribution {name!r} is declared but its command never "
                                  f"names ${{{{{kind}.{key}}}}}: Azure ML {'mounts' if kind == 'inputs' else 'creates'}"
                                  " it and the job never reads or writes it",
                                  f"pass ${{{{{kind}.{key}}}}} to the command (e.g. `--{key} ${{{{{kind}.{key}}}}}`), "
                                  f"or remove it from `{kind}:`")


JOB_INPUT = declare("distribution.job-input", "error", "a job input is not written as a command job passes it")


@rule_for_each("distributions", JOB_INPUT)
def distribution_job_inputs(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """Each input is written as a job passes it (validate/job_inputs.py): azure-ai-ml's load_job refuses the job
    file otherwise, so `infra render` could not write one Azure ML takes."""
    for key, value in dist.inputs.items():
        problem = input_problem(key, value)
        if problem is not None:
            where = ("distributions", name, "inputs", key) + ((problem.key,) if problem.key else ())
            yield ctx.at(where, JOB_INPUT.id,
                         f"input {key!r} of distribution {name!r} {problem.message}", problem.hint)


JOB_KEY = declare("distribution.job-key", "error", "a job service carries a key azure-ai-ml does not read")


@rule_for_each("distributions", JOB_KEY)
def distribution_job_services(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """Each entry of `services:` carries only the keys azure-ai-ml reads (validators/job_schema.yaml
    `services`, from the pinned azure-ai-ml's own schema): it refuses the job file otherwise."""
    known = job_schema().services
    for service, entry in dist.services.items():
        if not isinstance(entry, dict):
            yield ctx.at(("distributions", name, "services", service), JOB_KEY.id,
                         f"service {service!r} of distribution {name!r} must be a mapping ({{type: ..., nodes: ...}})",
                         f"write it as Azure ML's job YAML does: {service}: {{type: vs_code, nodes: all}}")
            continue
        for key in entry:
            if key in known:
                continue
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.4) if key != "job_service_type" \
                else ["type"]  # the preview schema's name of `type`
            yield ctx.at(("distributions", name, "services", service, key), JOB_KEY.id,
                         f"service {service!r} of distribution {name!r} has key {key!r}, which azure-ai-ml "
                         f"{job_schema().azure_ai_ml} does not read (it refuses the job: \"Unknown field\")",
                         (f"did you mean {close[0]!r}? " if close else "")
                         + f"a service takes {', '.join(k for k in known if not k.startswith('$'))}", key=True)


# A command job's identity types as azure-ai-ml reads them, in snake or camel case (its job schema,
# https://github.com/Azure/azure-sdk-for-python/blob/main/sdk/ml/azure-ai-ml/azure/ai/ml/_schema/job/identity.py).
JOB_IDENTITY_TYPES = ("user_identity", "managed", "managed_identity", "aml_token")


IDENTITY_TYPE = declare("distribution.identity-type", "error", "a job's identity type is not one Azure ML reads")


@rule_for_each("distributions", IDENTITY_TYPE)
def distribution_identity(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    if dist.identity is None:
        return
    kind = dist.identity.get("type")
    known = {t.replace("_", "") for t in JOB_IDENTITY_TYPES}   # UserIdentity, AMLToken, Managed read too
    if not (isinstance(kind, str) and kind.replace("_", "").lower() in known):
        where = ("distributions", name, "identity") + (("type",) if "type" in dist.identity else ())
        yield ctx.at(where, IDENTITY_TYPE.id,
                     f"distribution {name!r} has identity type {short_repr(kind)}, which Azure ML does not read "
                     "(it refuses the job)", "write identity: {type: user_identity} (or managed, managed_identity, aml_token)")


DANGLING_REFERENCE = declare("distribution.dangling-reference", "error",
                             "a distribution names a cluster or environment the stack does not declare")


@rule_for_each("distributions", DANGLING_REFERENCE)
def distribution_references(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    for section, ref in (("clusters", dist.cluster), ("environments", dist.environment)):
        if ref is None:
            continue   # no cluster: a compute infra does not manage (plan reads it live), or serverless compute
        known = list(getattr(ctx.stack, section))
        if ref not in known:
            close = difflib.get_close_matches(ref, known, n=1)
            field = section[:-1]
            yield ctx.at(("distributions", name, field), DANGLING_REFERENCE.id,
                         f"distribution {name!r} names {field} {ref!r}, which the stack does not declare",
                         (f"did you mean {close[0]!r}? " if close else "") +
                         (f"declared: {', '.join(known)}" if known else f"declare it under `{section}:`"))


def _multinode_transport(ctx: Context, size: str, required: bool) -> tuple[str, str | None, str] | None:
    """(why the cluster gives no InfiniBand to NCCL/MPI, why that is an error: "required", "fabric" or None for a
    warning, the transport between nodes)
    for a cluster whose size has none, None where it has (or the name says nothing). Errors are what Azure ML
    or the stack forbids: a cluster that requires InfiniBand, an RDMA size without SR-IOV (NCCL and MPI cannot
    use its fabric, the how-to-train-distributed-gpu guide's NC24r). Otherwise TCP sockets are a performance
    matter: a warning for GPUs, and nothing at all for CPU jobs, which run across nodes over TCP (gloo, MPI)."""
    sku = ctx.catalog.get(size)
    if sku is not None:
        if sku.infiniband_eligible:
            return None
        fabric_unusable = sku.rdma and not sku.sriov
        if sku.gpus == 0 and not (required or fabric_unusable):
            return None
        return ib_reason(sku), "fabric" if fabric_unusable else "required" if required else None, \
            sku.sockets_between_nodes
    parsed = parse_size_name(size)
    if parsed is None or parsed.rdma or (not parsed.family.startswith("N") and not required):
        return None  # size-unknown says the name is wrong; infiniband-unverified judges an `r` size; a CPU size
    return (f"{size} has no `r` (RDMA) in its name, so no InfiniBand", "required" if required else None,
            "TCP sockets on Ethernet (its bandwidth not in the catalog)")


INFINIBAND_UNVERIFIED = declare(
    "distribution.infiniband-unverified", "warning",
    "a multi-node distribution runs on an RDMA size the catalog does not know (SR-IOV unconfirmed)")
MULTINODE_WITHOUT_INFINIBAND = declare(
    "distribution.multinode-without-infiniband", "warning",
    "a multi-node GPU job runs on a size without usable InfiniBand (an error where it is required or unusable)",
    also="error")


@rule_for_each("distributions", INFINIBAND_UNVERIFIED, MULTINODE_WITHOUT_INFINIBAND)
def distribution_infiniband(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    size = ctx.size_of(dist)   # a cluster's size or a serverless job's instance_type
    if size is None or dist.instance_count < 2:
        return
    cluster = ctx.stack.clusters.get(dist.cluster) if dist.cluster is not None else None
    path = ("distributions", name, "instance_count")
    parsed = judged_by_name(ctx, size) if ctx.dist_sku(dist) is None else None
    if parsed is not None and parsed.rdma:
        yield ctx.warning(path, INFINIBAND_UNVERIFIED.id,
                     f"distribution {name!r} spans {dist.instance_count} nodes of {size}, an RDMA size "
                     "by its name (`r`) that the catalog does not know: whether NCCL and MPI can use its "
                     "InfiniBand (SR-IOV) is unconfirmed",
                     says("add the size to validators/skus.yaml with its sriov fact, or prove it with ",
                          NextStep(("infra", "smoke"))))
        return
    found = _multinode_transport(ctx, size, cluster is not None and cluster.infiniband == "required")
    if found is None:
        return
    reason, error, transport = found
    ib = ctx.catalog.gpu_infiniband_gbps()
    against = f" against {ib[0]:,}-{ib[1]:,} Gb/s of InfiniBand per VM on the InfiniBand GPU sizes" if ib else ""
    message = (f"distribution {name!r} spans {dist.instance_count} nodes of {ctx.runs_on_words(dist)}, but {reason}: "
               f"inter-node traffic goes over {transport}{against}, so scaling across nodes stays far from linear")
    sizes = ib_sizes_for(ctx, dist)
    sku = ctx.dist_sku(dist)
    figures = ("figures: validators/skus.yaml" + (f", {sku.name}'s Ethernet from {sku.source.split()[0]}"
                                                   if sku is not None and sku.ethernet_gbps else "")
               + ", the InfiniBand sizes' from their sources")
    if error:
        yield ctx.at(path, MULTINODE_WITHOUT_INFINIBAND.id, message,
                     f"use an SR-IOV InfiniBand size ({sizes}) or run on one node"
                     + ("" if error != "required" else
                        f", or set `infiniband: optional` on cluster {dist.cluster!r} to accept TCP sockets")
                     + f" ({figures})")
    else:
        yield ctx.warning(path, MULTINODE_WITHOUT_INFINIBAND.id, message,
                     f"for near-linear scaling use an InfiniBand size ({sizes}), or run on one node; the job runs "
                     f"as it is, slower ({figures})")


# What makes a job a GPU job wherever it is installed: every framework's modules (frameworks.yaml) and their pip names
_GPU_PACKAGES = frozenset({"torch", "tensorflow", "tensorflow-gpu", "jax", "pytorch-lightning"})


def _cpu_environment(ctx: Context, dist: Distribution) -> bool:
    """The distribution's environment is a curated one built for CPUs (curated_environments.yaml `gpu: false`), or
    the job runs no GPU framework (type mpi, no `framework:`, none installed) on an image of a CPU family (its
    `images:` row says `gpu: false`): Dask-MPI data preparation on openmpi4.1.0-ubuntu20.04."""
    env = ctx.stack.environments.get(dist.environment)
    if env is None:
        return False
    if env.curated:
        info = curated_info(env.curated)
        return info is not None and info.gpu is False
    image = image_info(env.image) if env.image else None
    if image is None or image.gpu is not False or dist.framework or dist.type in ("pytorch", "tensorflow"):
        return False
    gpu = _GPU_PACKAGES | {m.split(".")[0] for fw in frameworks().values() for m in fw.imports}
    return not environment_carries(env, ctx.loaded.base_dir, project_root(ctx.loaded.path)).provides & gpu


NO_GPUS = declare("distribution.no-gpus", "warning", "a distribution trains on a size without GPUs")
GPUS_EXCEEDED = declare("distribution.gpus-exceeded", "error", "more processes per node than the size has GPUs")
GPUS_UNDERUSED = declare("distribution.gpus-underused", "warning", "fewer processes per node than the size has GPUs")


@rule_for_each("distributions", NO_GPUS, GPUS_EXCEEDED, GPUS_UNDERUSED)
def distribution_gpus(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    sku = ctx.dist_sku(dist)
    if sku is None or dist.type == "tensorflow":
        return
    if dist.type == "ray":
        return   # `ray start` gives Ray every GPU of its node (distribution.ray-settings judges --num-gpus)
    if dist.type is None and (sku.gpus or not dist.framework):
        # no distribution: the command starts what it starts (one process: a preprocessing step, a single-GPU
        # script; or its own launcher, judged by the launch rules); only a framework on a CPU size is said
        return
    per_node = dist.processes_per_instance
    path = ("distributions", name, "process_count_per_instance")
    if launched_per_node(dist):
        return  # torchrun/Lightning start one process per GPU themselves (see distribution_launcher)
    if sku.gpus == 0 and dist.type == "mpi" and sku.infiniband_eligible:
        return  # CPU MPI on an HPC size (HB, HC, HX: InfiniBand over SR-IOV, no GPUs) is what they are for
    if sku.gpus == 0 and _cpu_environment(ctx, dist):
        return  # a CPU job on a CPU size (azure-ai-ml's dist_job_1/2: sklearn ...-cpu on Standard_DS3_v2; Dask-MPI)
    if sku.gpus == 0:
        yield ctx.warning(ctx.size_path(name, dist), NO_GPUS.id,
                     f"{sku.name} has no GPUs; distribution {name!r} will train on CPU",
                     "use a GPU size for GPU training; for CPU training use type: mpi on an HPC size (HB, HC, HX: InfiniBand)")
    elif per_node > sku.gpus:
        yield ctx.at(path, GPUS_EXCEEDED.id,
                     f"process_count_per_instance {per_node} exceeds the {sku.gpus} GPU(s) of {sku.name}",
                     f"set process_count_per_instance: {sku.gpus} (one process per GPU)")
    elif per_node < sku.gpus:
        yield ctx.warning(path, GPUS_UNDERUSED.id,
                     f"process_count_per_instance {per_node} uses {per_node} of the {sku.gpus} GPUs of {sku.name}",
                     f"set process_count_per_instance: {sku.gpus} to use every GPU you pay for")


INSTANCE_COUNT = declare("distribution.instance-count", "error",
                         "instance_count exceeds the cluster's max_instances: the job would queue forever")


@rule_for_each("distributions", INSTANCE_COUNT)
def distribution_instances(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    cluster = ctx.stack.clusters.get(dist.cluster)
    if cluster is not None and dist.instance_count > cluster.max_instances:
        yield ctx.at(("distributions", name, "instance_count"), INSTANCE_COUNT.id,
                     f"instance_count {dist.instance_count} exceeds max_instances {cluster.max_instances} "
                     f"of cluster {dist.cluster!r}: the job would queue forever",
                     f"raise clusters.{dist.cluster}.max_instances to {dist.instance_count} or lower instance_count")


MPI_MISSING = declare("distribution.mpi-missing", "error",
                      "an MPI-launched distribution's environment is known to carry no MPI")
MPI_UNVERIFIED = declare("distribution.mpi-unverified", "warning",
                         "whether an MPI-launched distribution's environment carries an MPI is unknown")


@rule_for_each("distributions", MPI_MISSING, MPI_UNVERIFIED, framework=True)
def distribution_mpi(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    mpi_types = types_needing_mpi()
    env = ctx.stack.environments.get(dist.environment)
    needs = dist.type in mpi_types or bool(fw and dist.type in fw.needs_mpi_with_type)
    if env is None or not needs:
        return
    carries = environment_carries(env, ctx.loaded.base_dir, project_root(ctx.loaded.path))
    # Open MPI is recommended; another MPI (Intel MPI, MPICH) also runs Azure ML's MPI jobs (the guide).
    if carries.provides & {"openmpi", "hpcx", "mpi"}:
        return
    why = f"distribution {name!r} ({dist.framework + ' under ' if dist.framework else ''}type {dist.type}) " \
          f"is launched by Azure ML with mpirun"
    if carries.complete:
        yield ctx.at(("distributions", name, "environment"), MPI_MISSING.id,
                     f"{why}, but environment {dist.environment!r} is not known to carry an MPI "
                     f"({carries.evidence})",
                     says("build FROM an AzureML Open MPI base image (mcr.microsoft.com/azureml/openmpi4.1.0-...) in "
                          f"{posixpath.normpath(env.build.path + '/' + env.build.dockerfile_path)}, or install an MPI "
                          f"there and declare `requires: [openmpi>=4.1]` on environments.{dist.environment} (checked "
                          "by ", NextStep(("infra", "image", "check")), ")") if env.build and env.build.path else
                     says(f"add `requires: [openmpi>=4.1]` to environments.{dist.environment} (and check it with ",
                          NextStep(("infra", "image", "check")), "), use a curated GPU environment or an mcr.microsoft.com/azureml/openmpi* "
                          "base image, or build it from infra's template: `build: {template: openmpi-rdma}`"))
    else:
        yield ctx.warning(("distributions", name, "environment"), MPI_UNVERIFIED.id,
                     f"{why}; whether environment {dist.environment!r} carries an MPI is unknown: "
                     f"{carries.evidence}",
                     says("declare `requires: [openmpi]` on the environment so ", NextStep(("infra", "image", "check")), " can prove it"))


PACKAGES_MISSING = declare("distribution.packages-missing", "error",
                           "the environment is known to lack a package the framework imports on every rank")
PACKAGES_UNVERIFIED = declare("distribution.packages-unverified", "warning",
                              "whether the environment carries a package the framework imports is unknown")


@rule_for_each("distributions", PACKAGES_MISSING, PACKAGES_UNVERIFIED, framework=True)
def distribution_packages(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    """DeepSpeed under MPI needs deepspeed and mpi4py, Horovod needs horovod (frameworks.yaml)."""
    env = ctx.stack.environments.get(dist.environment)
    wanted = (fw.packages_with_type or {}).get(dist.type, ()) if fw else ()
    if env is None or fw is None or not wanted:
        return
    carries = environment_carries(env, ctx.loaded.base_dir, project_root(ctx.loaded.path))
    missing = [p for p in wanted if p not in carries.provides]
    if not missing:
        return
    what = f"{fw.name} under type {dist.type} imports {', '.join(wanted)} on every rank"
    listed = ", ".join(missing)
    deepspeed = (", or build it from templates/docker/openmpi-rdma with pip_packages: [deepspeed] (it adds mpi4py)"
                 if fw.name == "deepspeed" else "")
    hint: str = says(f"add `requires: [{', '.join(wanted)}]` to environments.{dist.environment} (checked by ",
                     NextStep(("infra", "image", "check")), ")" + deepspeed)
    if carries.package_files:   # the files were read: the package goes there (requires would only silence it)
        hint = (f"add {listed} to {' or '.join(carries.package_files)} (the environment installs what it lists); "
                "`requires:` would only declare it, not install it")
    if carries.complete:
        yield ctx.at(("distributions", name, "environment"), PACKAGES_MISSING.id,
                     f"{what}, but environment {dist.environment!r} is not known to carry {listed} "
                     f"({carries.evidence})", hint)
    else:
        yield ctx.warning(("distributions", name, "environment"), PACKAGES_UNVERIFIED.id,
                     f"{what}; whether environment {dist.environment!r} carries {listed} is unknown "
                     f"({carries.evidence})", hint)


FRAMEWORK_TYPE = declare("distribution.framework-type", "error",
                         "the framework does not run under the distribution type")
FRAMEWORK_LAUNCHER = declare("distribution.framework-launcher", "error",
                             "the framework is not launched the way the distribution launches it")


@rule_for_each("distributions", FRAMEWORK_TYPE, FRAMEWORK_LAUNCHER, framework=True)
def distribution_framework(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    if fw is None:
        return
    if dist.type is not None and dist.type not in fw.types:   # no type: one node, the command starts what it runs
        yield ctx.at(("distributions", name, "type"), FRAMEWORK_TYPE.id,
                     f"framework {fw.name} does not run under distribution type {dist.type}",
                     f"use type: {' or '.join(fw.types)} ({fw.source})")
    if dist.launcher not in fw.launchers:
        declared = ("distributions", name, "launcher") in ctx.loaded.source.keys
        yield ctx.at(("distributions", name, "launcher" if declared or not dist.command else "command"),
                     FRAMEWORK_LAUNCHER.id,
                     f"framework {fw.name} is not launched {dist.launcher}"
                     + ("" if declared else " (the command's launcher starts processes per node)"),
                     f"use launcher: {' or '.join(fw.launchers)}" if declared else
                     f"launch {fw.name} {' or '.join(fw.launchers)}: e.g. `command: python train.py` with "
                     "process_count_per_instance set to the GPUs per node")


UNTYPED_NODES = declare("distribution.untyped-nodes", "warning",
                        "a job without a distribution type spans several nodes: each runs the command alone")


@rule_for_each("distributions", UNTYPED_NODES)
def distribution_untyped(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """A command job without a distribution runs its command once on each of its nodes, and Azure ML sets none of
    the variables that join them (MASTER_ADDR, RANK, OMPI_COMM_WORLD_*, TF_CONFIG): n copies of one job."""
    if dist.type is not None or dist.instance_count < 2:
        return
    yield ctx.warning(("distributions", name, "instance_count"), UNTYPED_NODES.id,
                      f"distribution {name!r} has no distribution type but {dist.instance_count} nodes: Azure ML runs "
                      f"the command on each node alone, with no rendezvous between them ({dist.instance_count} "
                      "copies of one job)",
                      "set a type (pytorch, mpi, tensorflow, ray) for a job across nodes, or instance_count: 1")


# `ray start --num-gpus N` (or --num-gpus=N) in the head or worker node's additional arguments
_RAY_NUM_GPUS = re.compile(r"(?:^|\s)--num-gpus(?:=|\s+)(\S+)")


RAY_SETTINGS = declare("distribution.ray-settings", "error",
                       "a ray distribution's settings contradict themselves or the size (one port for Ray and its "
                       "dashboard, `ray start --num-gpus` beyond the size's GPUs)")


@rule_for_each("distributions", RAY_SETTINGS)
def distribution_ray(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """Ray on Azure ML: `ray start --head` on the first node, `ray start --address` on the others, the command on
    the head node. One port for Ray and its dashboard cannot be; a node told it has more GPUs than its size has
    schedules tasks on GPUs that are not there."""
    if dist.type != "ray":
        return
    ray, base = dist.ray, ("distributions", name, "distribution")
    if ray.get("port") is not None and ray.get("port") == ray.get("dashboard_port"):
        yield ctx.at(base + ("dashboard_port",), RAY_SETTINGS.id,
                     f"distribution {name!r} gives Ray and its dashboard one port, {ray['port']}: the second to start "
                     "cannot bind it", "give dashboard_port another port (Ray's default: 8265; Ray's own: 6379)")
    sku = ctx.dist_sku(dist)
    for key in ("head_node_additional_args", "worker_node_additional_args"):
        m = _RAY_NUM_GPUS.search(ray.get(key) or "")
        wanted = m.group(1) if m else None
        if sku is None or wanted is None or not wanted.isdigit() or int(wanted) <= sku.gpus:
            continue
        yield ctx.at(base + (key,), RAY_SETTINGS.id,
                     f"distribution {name!r} starts Ray with --num-gpus {wanted} but {sku.name} has {sku.gpus} "
                     "GPU(s) per node: Ray schedules tasks on GPUs that are not there",
                     f"remove --num-gpus (Ray finds the node's GPUs itself) or set it to at most {sku.gpus}")
