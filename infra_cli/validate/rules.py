"""Offline rules: pure functions from a loaded stack (and the knowledge in validators/) to diagnostics.

Each rule has an id (its `rule` field), a message naming the offending value and a hint saying how to fix
it. They never touch the network; live checks (quota, region) belong to the plan's preflight.
"""

from __future__ import annotations

import datetime
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import yaml

from infra_cli.catalog import Catalog, Sku
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.image.dockerfile import template_parameters
from infra_cli.image.spec import SpecError, parse_requirement
from infra_cli.paths import templates_dir
from infra_cli.size_name import parse_size_name
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import Distribution, Environment
from infra_cli.validate import knowledge



@dataclass(frozen=True)
class NamePattern:
    section: str
    rule: str
    pattern: re.Pattern
    what: str
    hint: str


# Names Azure accepts. Distribution names become plan addresses (smoke.NAME) and part of job names.
NAME_PATTERNS = (
    NamePattern("clusters", "cluster.name", re.compile(r"^[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]$"),
                "an Azure ML compute name",
                "use 3-24 characters: a letter first, then letters, digits or hyphens, not ending in a hyphen"),
    NamePattern("environments", "environment.name", re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$"),
                "an Azure ML asset name", "start with a letter or digit; then letters, digits, '-', '_' or '.'"),
    NamePattern("distributions", "distribution.name", re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$"),
                "usable in an Azure ML job name",
                "use up to 100 letters, digits, '-' or '_', starting with a letter or digit"),
)


@dataclass(frozen=True)
class Context:
    loaded: LoadedStack
    catalog: Catalog
    today: datetime.date = field(default_factory=datetime.date.today)  # retirements are judged as of this day

    @property
    def stack(self):
        return self.loaded.stack

    def at(self, path: tuple, rule: str, message: str, hint: str, severity: str = "error",
           key: bool = False) -> Diagnostic:
        return self.loaded.source.diagnostic(path, rule, message, hint, severity, key=key)

    def sku(self, cluster_name: str) -> Sku | None:
        cluster = self.stack.clusters.get(cluster_name)
        return self.catalog.get(cluster.size) if cluster else None


Rule = Callable[[Context], Iterator[Diagnostic]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def _ib_reason(sku: Sku) -> str:
    if sku.rdma and not sku.sriov:
        return f"{sku.name} has RDMA but no SR-IOV, so NCCL and MPI inside Azure ML cannot use its InfiniBand"
    return f"{sku.name} has no InfiniBand" + (f" ({sku.note.rstrip('.')})" if sku.note else "")


def _ib_sizes(catalog: Catalog) -> str:
    # current sizes only: a retiring size is no advice
    return ", ".join(s.name for s in catalog
                     if s.infiniband_eligible and s.nccl_over_ib and s.retirement_date is None)


# ---- clusters -------------------------------------------------------------------------------------------

@rule
def resource_names(ctx: Context) -> Iterator[Diagnostic]:
    for np in NAME_PATTERNS:
        for name in getattr(ctx.stack, np.section):
            if not np.pattern.match(name):
                yield ctx.at((np.section, name), np.rule, f"{np.section[:-1]} name {name!r} is not {np.what}",
                             np.hint, key=True)


def _same_family(size: str, catalog: Catalog) -> list[str]:
    """Catalogued sizes of the same family by name (ND for ND, never ND for DS): where a did-you-mean may look."""
    parsed = parse_size_name(size)
    return catalog.family_names(parsed.family) if parsed else []


def _retirement(sku: Sku) -> str:
    day = sku.retirement_date
    when = "" if day is None or day == datetime.date.min else f" on {day.isoformat()}"
    return when + (f" ({sku.retirement_source})" if sku.retirement_source else "")


@rule
def cluster_size(ctx: Context) -> Iterator[Diagnostic]:
    for name, cluster in ctx.stack.clusters.items():
        path = ("clusters", name, "size")
        sku = ctx.catalog.get(cluster.size)
        if sku is None:
            parsed = parse_size_name(cluster.size)
            close = difflib.get_close_matches(cluster.size, _same_family(cluster.size, ctx.catalog), n=1, cutoff=0.75)
            mean = f"did you mean {close[0]!r}? " if close else ""
            if parsed is None:
                yield ctx.at(path, "cluster.size-unknown",
                             f"size {cluster.size!r} is not an Azure VM size name (Standard_<family><vCPUs><features>"
                             "[_<accelerator>][_v<version>])",
                             mean + "see `infra skus` or https://learn.microsoft.com/azure/virtual-machines/sizes/overview")
            elif parsed.gpu_or_hpc:  # the catalog sets out to cover these families: a gap worth saying
                rdma = "an RDMA size (`r`), SR-IOV unconfirmed" if parsed.rdma else "no RDMA (no `r` in its name)"
                yield ctx.at(path, "cluster.size-unknown",
                             f"size {cluster.size!r} is not in the SKU catalog; judged by its name: {parsed.family} family, "
                             f"{rdma}", mean + "add the size to validators/skus.yaml (with its source) so its GPUs and "
                             "InfiniBand can be checked", "warning")
        elif sku.retired_as_of(ctx.today):
            # Azure creates no new VM of a retired size; a cluster that exists keeps its nodes until Azure
            # deallocates them. Offline nothing says it exists: `infra plan` downgrades this for a live cluster.
            yield ctx.at(path, "cluster.size-retired",
                         f"{sku.name} was retired by Azure{_retirement(sku)}: a new cluster of this size cannot be created",
                         f"choose a current size, e.g. {_ib_sizes(ctx.catalog).split(', ')[0]} "
                         "(`infra plan` reports a cluster that already exists as a warning)")
        elif sku.retiring_as_of(ctx.today):
            yield ctx.at(path, "cluster.size-retiring",
                         f"Azure retires {sku.name}{_retirement(sku)}; the cluster stops working then",
                         "plan the move to a current size (`infra skus`)", "warning")


@rule
def cluster_infiniband(ctx: Context) -> Iterator[Diagnostic]:
    for name, cluster in ctx.stack.clusters.items():
        if cluster.infiniband != "required":
            continue
        path = ("clusters", name, "size")
        sku = ctx.catalog.get(cluster.size)
        parsed = parse_size_name(cluster.size) if sku is None else None
        if sku is not None and not sku.infiniband_eligible:
            yield ctx.at(path, "cluster.infiniband-ineligible",
                         f"cluster {name!r} requires InfiniBand but {_ib_reason(sku)}",
                         f"use an SR-IOV InfiniBand size ({_ib_sizes(ctx.catalog)}) or set `infiniband: optional`")
        elif parsed is not None and not parsed.rdma:
            yield ctx.at(path, "cluster.infiniband-ineligible",
                         f"cluster {name!r} requires InfiniBand but {cluster.size} has no `r` (RDMA) in its name",
                         f"use an SR-IOV InfiniBand size ({_ib_sizes(ctx.catalog)}) or set `infiniband: optional`")
        elif parsed is not None:
            yield ctx.at(path, "cluster.infiniband-unverified",
                         f"cluster {name!r} requires InfiniBand; {cluster.size} is an RDMA size by its name, but "
                         "whether NCCL and MPI can use it (SR-IOV) is unconfirmed: NC24r-class sizes cannot",
                         "add the size to validators/skus.yaml with its sriov fact, or prove it with `infra smoke`",
                         "warning")


@rule
def cluster_ssh(ctx: Context) -> Iterator[Diagnostic]:
    for name, cluster in ctx.stack.clusters.items():
        ssh = cluster.ssh_settings
        if cluster.ssh_public_access_enabled and not (ssh and ssh.admin_username and (ssh.ssh_key_value or ssh.admin_password)):
            yield ctx.at(("clusters", name, "ssh_public_access_enabled"), "cluster.ssh-settings",
                         f"cluster {name!r} enables SSH access without an admin user and key",
                         "add ssh_settings: {admin_username: ..., ssh_key_value: ${SSH_PUBLIC_KEY}}")


@rule
def cluster_ssh_secret_inline(ctx: Context) -> Iterator[Diagnostic]:
    for name, cluster in ctx.stack.clusters.items():
        if cluster.ssh_settings is None or cluster.ssh_settings.admin_password is None:
            continue
        path = ("clusters", name, "ssh_settings", "admin_password")
        if path not in ctx.loaded.source.interpolated:
            yield ctx.at(path, "cluster.ssh-password-inline",
                         f"cluster {name!r} has its SSH admin password written in the stack file, where anyone who "
                         "reads the file (or its git history) has it",
                         "write admin_password: ${NODE_ADMIN_PASSWORD} and set that variable where infra runs, "
                         "or use ssh_key_value instead", "warning")


@rule
def cluster_location(ctx: Context) -> Iterator[Diagnostic]:
    ws = ctx.stack.workspace.location
    for name, cluster in ctx.stack.clusters.items():
        if cluster.location and cluster.location.replace(" ", "").lower() != ws:
            yield ctx.at(("clusters", name, "location"), "cluster.location",
                         f"cluster {name!r} is in {cluster.location} but the workspace is in {ws}",
                         "remove `location` (clusters default to the workspace's region) unless cross-region compute is intended",
                         "warning")


@rule
def cluster_node_public_ip(ctx: Context) -> Iterator[Diagnostic]:
    for name, cluster in ctx.stack.clusters.items():
        if not cluster.enable_node_public_ip and not (cluster.network_settings and cluster.network_settings.subnet):
            # Azure ML refuses it: nodes without public IPs need a subnet to live in (and its outbound route).
            yield ctx.at(("clusters", name, "enable_node_public_ip"), "cluster.public-ip-without-subnet",
                         f"cluster {name!r} turns node public IPs off without a subnet; Azure ML requires a virtual "
                         "network subnet for a cluster with no public IP",
                         "add network_settings: {subnet: ...} (see https://learn.microsoft.com/azure/machine-learning/"
                         "how-to-secure-training-vnet) or remove enable_node_public_ip: false")


@rule
def cluster_compute_name(ctx: Context) -> Iterator[Diagnostic]:
    for name, cluster in ctx.stack.clusters.items():
        if cluster.name is not None and cluster.name != name:
            # One name per cluster: the key is the plan address (cluster.KEY) and the Azure ML compute name.
            yield ctx.at(("clusters", name, "name"), "cluster.name-mismatch",
                         f"cluster {name!r} says name: {cluster.name!r}; a pasted compute YAML's name must equal "
                         "its key under clusters:",
                         f"rename the key to {cluster.name!r} or remove `name:`")


# ---- environments ---------------------------------------------------------------------------------------

def _build_template_dir(name: str) -> Path:
    return templates_dir() / "docker" / name


def build_template_provides(name: str) -> dict[str, str | None] | None:
    """What an image built from templates/docker/NAME provides (its template.yaml), or None if unknown."""
    meta = _build_template_dir(name) / "template.yaml"
    if not meta.is_file():
        return None
    with open(meta, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    provides: dict[str, str | None] = {}
    for spec in data.get("provides") or []:
        req = parse_requirement(spec)
        provides[req.name] = req.version
    return provides


@rule
def environment_requires(ctx: Context) -> Iterator[Diagnostic]:
    for name, env in ctx.stack.environments.items():
        for i, spec in enumerate(env.requires):
            try:
                parse_requirement(spec)
            except SpecError as exc:
                yield ctx.at(("environments", name, "requires", i), "environment.requires-spec", str(exc),
                             "write a spec such as openmpi>=4.1, mpi, ibverbs, nccl>=2.18")


@rule
def environment_files(ctx: Context) -> Iterator[Diagnostic]:
    base = ctx.loaded.base_dir
    for name, env in ctx.stack.environments.items():
        if env.conda_file and not (base / env.conda_file).is_file():
            yield ctx.at(("environments", name, "conda_file"), "environment.file-missing",
                         f"conda file {env.conda_file!r} does not exist (looked in {base})",
                         "conda_file is relative to the stack file")
        if env.build and env.build.path and not (base / env.build.path).is_dir():
            yield ctx.at(("environments", name, "build", "path"), "environment.file-missing",
                         f"build context {env.build.path!r} is not a directory (looked in {base})",
                         "build.path is relative to the stack file")
        elif env.build and env.build.path and not (base / env.build.path / env.build.dockerfile_path).is_file():
            # Azure ML uploads the whole directory before it finds there is nothing to build.
            yield ctx.at(("environments", name, "build", "path"), "environment.file-missing",
                         f"build context {env.build.path!r} has no {env.build.dockerfile_path} "
                         f"(looked for {base / env.build.path / env.build.dockerfile_path})",
                         "point build.path at the directory that holds the Dockerfile, or set build.dockerfile_path")
        if env.build and env.build.template and build_template_provides(env.build.template) is None:
            known = sorted(p.name for p in (templates_dir() / "docker").glob("*") if (p / "template.yaml").is_file()) \
                if (templates_dir() / "docker").is_dir() else []
            yield ctx.at(("environments", name, "build", "template"), "environment.template-unknown",
                         f"no Dockerfile template named {env.build.template!r} in templates/docker/",
                         f"known templates: {', '.join(known) or '(none)'}")


@rule
def environment_template_parameters(ctx: Context) -> Iterator[Diagnostic]:
    for name, env in ctx.stack.environments.items():
        if not (env.build and env.build.template) or build_template_provides(env.build.template) is None:
            continue  # no template: environment_files reports it
        try:
            template_parameters(env.build.template, dict(env.build.parameters))
        except DiagnosticError as exc:  # the template's own check, pointed at the stack instead of template.yaml
            for d in exc.diagnostics:
                yield ctx.at(("environments", name, "build", "parameters"), "environment.template-parameters",
                             d.message, d.hint or f"see templates/docker/{env.build.template}/template.yaml")


# ---- distributions --------------------------------------------------------------------------------------

@rule
def distribution_references(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        for section, ref in (("clusters", dist.cluster), ("environments", dist.environment)):
            known = list(getattr(ctx.stack, section))
            if ref not in known:
                close = difflib.get_close_matches(ref, known, n=1)
                field = section[:-1]
                yield ctx.at(("distributions", name, field), "distribution.dangling-reference",
                             f"distribution {name!r} names {field} {ref!r}, which the stack does not declare",
                             (f"did you mean {close[0]!r}? " if close else "") +
                             (f"declared: {', '.join(known)}" if known else f"declare it under `{section}:`"))


@rule
def distribution_infiniband(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        cluster = ctx.stack.clusters.get(dist.cluster)
        if cluster is None or dist.instance_count < 2:
            continue
        sku = ctx.sku(dist.cluster)
        path = ("distributions", name, "instance_count")
        if sku is not None:
            if sku.infiniband_eligible:
                continue
            reason = _ib_reason(sku)
        else:
            parsed = parse_size_name(cluster.size)
            if parsed is None:
                continue  # cluster.size-unknown says the name is wrong
            if parsed.rdma:
                yield ctx.at(path, "distribution.infiniband-unverified",
                             f"distribution {name!r} spans {dist.instance_count} nodes of {cluster.size}, an RDMA size "
                             "by its name (`r`) that the catalog does not know: whether NCCL and MPI can use its "
                             "InfiniBand (SR-IOV) is unconfirmed",
                             "add the size to validators/skus.yaml with its sriov fact, or prove it with `infra smoke`",
                             "warning")
                continue
            reason = f"{cluster.size} has no `r` (RDMA) in its name, so no InfiniBand"
        message = (f"distribution {name!r} spans {dist.instance_count} nodes of cluster {dist.cluster!r}, "
                   f"but {reason}: inter-node traffic falls back to TCP sockets")
        if cluster.infiniband == "optional":
            yield ctx.at(path, "distribution.multinode-without-infiniband", message,
                         "expect a fraction of InfiniBand bandwidth", "warning")
        else:
            yield ctx.at(path, "distribution.multinode-without-infiniband", message,
                         f"use an InfiniBand size ({_ib_sizes(ctx.catalog)}), run on one node, "
                         f"or set `infiniband: optional` on cluster {dist.cluster!r} to accept sockets")


@rule
def distribution_gpus(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        sku = ctx.sku(dist.cluster)
        if sku is None or dist.type == "tensorflow":
            continue
        per_node = dist.processes_per_instance
        path = ("distributions", name, "process_count_per_instance")
        if dist.launcher == "per-node":
            continue  # torchrun/Lightning start one process per GPU themselves (see distribution_launcher)
        if sku.gpus == 0:
            yield ctx.at(("distributions", name, "cluster"), "distribution.no-gpus",
                         f"{sku.name} has no GPUs; distribution {name!r} will train on CPU",
                         "use a GPU size for GPU training (CPU MPI jobs on HB/HC sizes are fine)", "warning")
        elif per_node > sku.gpus:
            yield ctx.at(path, "distribution.gpus-exceeded",
                         f"process_count_per_instance {per_node} exceeds the {sku.gpus} GPU(s) of {sku.name}",
                         f"set process_count_per_instance: {sku.gpus} (one process per GPU)")
        elif per_node < sku.gpus:
            yield ctx.at(path, "distribution.gpus-underused",
                         f"process_count_per_instance {per_node} uses {per_node} of the {sku.gpus} GPUs of {sku.name}",
                         f"set process_count_per_instance: {sku.gpus} to use every GPU you pay for", "warning")


@rule
def distribution_instances(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        cluster = ctx.stack.clusters.get(dist.cluster)
        if cluster is not None and dist.instance_count > cluster.max_instances:
            yield ctx.at(("distributions", name, "instance_count"), "distribution.instance-count",
                         f"instance_count {dist.instance_count} exceeds max_instances {cluster.max_instances} "
                         f"of cluster {dist.cluster!r}: the job would queue forever",
                         f"raise clusters.{dist.cluster}.max_instances to {dist.instance_count} or lower instance_count")


def _environment_mpi(env: Environment) -> tuple[bool | None, str]:
    """Whether the environment carries Open MPI: True, False, or None (cannot tell); with the evidence."""
    if env.curated:
        info = knowledge.curated_info(env.curated)
        if info is None:
            return None, f"curated environment {env.curated!r} is not in validators/curated_environments.yaml"
        return "openmpi" in info.provides, info.source
    declared = {parse_requirement(s).name for s in env.requires if _parses(s)}
    if declared & {"openmpi", "hpcx"}:
        return True, "declared in requires"
    if env.build and env.build.template:
        provides = build_template_provides(env.build.template) or {}
        if "openmpi" in provides or "hpcx" in provides:
            return True, f"templates/docker/{env.build.template} installs it"
    if "mpi" in declared:
        return None, "requires `mpi` (any MPI); Azure ML launches mpi jobs with Open MPI's mpirun"
    return False, "a custom image carries only what it declares"


def _parses(spec: str) -> bool:
    try:
        parse_requirement(spec)
        return True
    except SpecError:
        return False


@rule
def distribution_mpi(ctx: Context) -> Iterator[Diagnostic]:
    fws = knowledge.frameworks()
    mpi_types = knowledge.types_needing_mpi()
    for name, dist in ctx.stack.distributions.items():
        env = ctx.stack.environments.get(dist.environment)
        fw = fws.get(dist.framework) if dist.framework else None
        needs = dist.type in mpi_types or bool(fw and dist.type in fw.needs_mpi_with_type)
        if env is None or not needs:
            continue
        has_mpi, evidence = _environment_mpi(env)
        why = f"distribution {name!r} ({dist.framework + ' under ' if dist.framework else ''}type {dist.type}) " \
              f"is launched by Azure ML with mpirun"
        if has_mpi is False:
            yield ctx.at(("distributions", name, "environment"), "distribution.mpi-missing",
                         f"{why}, but environment {dist.environment!r} is not known to carry Open MPI ({evidence})",
                         f"add `requires: [openmpi>=4.1]` to environments.{dist.environment} (and check it with "
                         "`infra image check`), use a curated GPU environment, or build from templates/docker/openmpi-rdma")
        elif has_mpi is None:
            yield ctx.at(("distributions", name, "environment"), "distribution.mpi-unverified",
                         f"{why}; whether environment {dist.environment!r} carries Open MPI is unknown: {evidence}",
                         "declare `requires: [openmpi]` on the environment so `infra image check` can prove it",
                         "warning")


@rule
def distribution_framework(ctx: Context) -> Iterator[Diagnostic]:
    fws = knowledge.frameworks()
    for name, dist in ctx.stack.distributions.items():
        fw = fws.get(dist.framework) if dist.framework else None
        if fw is None:
            continue
        if dist.type not in fw.types:
            yield ctx.at(("distributions", name, "type"), "distribution.framework-type",
                         f"framework {fw.name} does not run under distribution type {dist.type}",
                         f"use type: {' or '.join(fw.types)} ({fw.source})")
        if dist.launcher not in fw.launchers:
            yield ctx.at(("distributions", name, "launcher"), "distribution.framework-launcher",
                         f"framework {fw.name} is not launched {dist.launcher}",
                         f"use launcher: {' or '.join(fw.launchers)}")


@rule
def distribution_launcher(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        if dist.launcher == "per-node" and dist.processes_per_instance > 1:
            yield ctx.at(("distributions", name, "process_count_per_instance"), "distribution.per-node-launcher",
                         f"distribution {name!r} uses a per-node launcher (torchrun, Lightning) that starts one process "
                         f"per GPU itself; process_count_per_instance {dist.processes_per_instance} would start "
                         f"{dist.processes_per_instance} launchers per node",
                         "remove process_count_per_instance (or set it to 1) with launcher: per-node")


@rule
def distribution_tensorflow(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        base = ("distributions", name)
        if dist.type != "tensorflow":
            for field in ("worker_count", "parameter_server_count"):
                if getattr(dist, field) is not None:
                    yield ctx.at(base + (field,), "distribution.tensorflow-counts",
                                 f"{field} applies only to type tensorflow (this is {dist.type})",
                                 f"remove {field}, or set type: tensorflow")
            continue
        if dist.process_count_per_instance is not None:
            # Azure ML's TensorFlow distribution has only worker_count and parameter_server_count.
            yield ctx.at(base + ("process_count_per_instance",), "distribution.tensorflow-counts",
                         "process_count_per_instance does not apply to type tensorflow",
                         "remove it and set worker_count (one worker per node uses all its GPUs)")
        workers = dist.worker_count or dist.instance_count
        ps = dist.parameter_server_count or 0
        if workers + ps > dist.instance_count:
            yield ctx.at(base + ("worker_count",), "distribution.tensorflow-counts",
                         f"{workers} worker(s) + {ps} parameter server(s) need {workers + ps} nodes, but "
                         f"instance_count is {dist.instance_count}",
                         f"set instance_count: {workers + ps} or lower worker_count/parameter_server_count")
        if ps and ps >= workers:
            yield ctx.at(base + ("parameter_server_count",), "distribution.tensorflow-counts",
                         f"{ps} parameter server(s) for {workers} worker(s) is unusual and wastes nodes",
                         "use fewer parameter servers than workers (or none with MultiWorkerMirroredStrategy)",
                         "warning")


@rule
def distribution_transformers_local_rank(ctx: Context) -> Iterator[Diagnostic]:
    fws = knowledge.frameworks()
    for name, dist in ctx.stack.distributions.items():
        fw = fws.get(dist.framework) if dist.framework else None
        needle = fw.per_process_command_must_contain if fw else None
        # HF's argument parser accepts --local_rank and --local-rank alike: compare with '_' and '-' folded
        if needle and dist.launcher == "per-process" and dist.command and \
                needle.replace("_", "-") not in dist.command.replace("_", "-"):
            yield ctx.at(("distributions", name, "command"), "distribution.transformers-local-rank",
                         f"{fw.name} under per-process launch needs {needle} in its command: Azure ML sets only the "
                         "LOCAL_RANK variable",
                         f"append `{needle} $LOCAL_RANK` to the command")


@rule
def distribution_ib_disabled(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        sku = ctx.sku(dist.cluster)
        env = dist.environment_variables
        if sku and sku.infiniband_eligible and dist.instance_count > 1 and (
                env.get("NCCL_IB_DISABLE") == "1" or env.get("NCCL_NET", "").lower() == "socket"):
            yield ctx.at(("distributions", name, "environment_variables"), "distribution.infiniband-disabled",
                         f"distribution {name!r} disables NCCL's InfiniBand on {sku.name}, which you pay for",
                         "remove NCCL_IB_DISABLE / NCCL_NET=Socket (keep them only as a deliberate negative control)",
                         "warning")


@rule
def distribution_launcher_variables(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist in ctx.stack.distributions.items():
        sets = knowledge.launcher_variables().get(dist.type, {})
        for var in dist.environment_variables:
            severity = sets.get(var)
            if severity is None:
                continue
            per_process = severity == "error"
            yield ctx.at(("distributions", name, "environment_variables", var), "distribution.launcher-variable",
                         f"distribution {name!r} sets {var}, which Azure ML's {dist.type} launcher sets "
                         + ("for each process: one value for every process breaks the ranks" if per_process else
                            "to the rendezvous it starts: another value leaves ranks waiting for a peer that never comes"),
                         f"remove {var} from environment_variables; Azure ML sets it",
                         severity, key=True)


def run_rules(loaded: LoadedStack, catalog: Catalog, today: datetime.date | None = None) -> list[Diagnostic]:
    ctx = Context(loaded, catalog, today or datetime.date.today())
    out: list[Diagnostic] = []
    for fn in RULES:
        out.extend(fn(ctx))
    return out
