"""Offline rules: pure functions from a loaded stack (and the knowledge in validators/) to diagnostics.

Each rule has an id (its `rule` field), a message naming the offending value and a hint saying how to fix
it. They never touch the network; live checks (quota, region) belong to the plan's preflight.
"""

from __future__ import annotations

import datetime
import difflib
import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator


from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.docker_templates import (
    TEMPLATE_NAME_HINT, described_templates, parameter_problems, template_dir, template_meta)
from infra_cli.knowledge.grammars import REFERENCE_GRAMMAR, image_reference_problem
from infra_cli.knowledge.requirements import SpecError, parse_requirement
from infra_cli.knowledge.curated import curated_info, image_info
from infra_cli.knowledge.frameworks import (FrameworkInfo, frameworks, launcher_variables, node_rank_variables,
                                            types_needing_mpi)
from infra_cli.knowledge.job_schema import job_schema
from infra_cli.knowledge.launchers import launchers
from infra_cli.knowledge.names import name_rules, tag_limits
from infra_cli.knowledge.skus import Catalog, Sku
from infra_cli.paths import context_files, inside, project_root
from infra_cli.knowledge.size_name import parse_size_name
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.source import load_yaml, short_repr
from infra_cli.stack.model import Cluster, Distribution, Environment
from infra_cli.stack.outputs import check_outputs
from infra_cli.validate.build_steps import build_step_problems
from infra_cli.validate.dockerfile import pip_name, read_dockerfile
from infra_cli.validate.job_inputs import input_problem
from infra_cli.stack.launch import CommandSyntaxError, Launch, count, parse_steps, training_step, variables



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

    def warning(self, path: tuple, rule: str, message: str, hint: str) -> Diagnostic:
        return self.at(path, rule, message, hint, "warning")

    def sku(self, cluster_name: str) -> Sku | None:
        cluster = self.stack.clusters.get(cluster_name)
        return self.catalog.get(cluster.size) if cluster else None

    @staticmethod
    def framework(dist: Distribution) -> FrameworkInfo | None:
        """The distribution's framework facts from frameworks.yaml (None without a framework)."""
        return frameworks().get(dist.framework) if dist.framework else None


Rule = Callable[[Context], Iterator[Diagnostic]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def rule_for_each(section: str, *, framework: bool = False) -> Callable[[Callable[..., Iterator[Diagnostic]]], Rule]:
    """A rule judged once per entry of a stack section (clusters, environments, distributions):
    fn(ctx, name, entry) yields the entry's diagnostics; with framework=True (distributions),
    fn(ctx, name, dist, fw) also gets the framework's facts from frameworks.yaml (None without one)."""
    def register(fn: Callable[..., Iterator[Diagnostic]]) -> Rule:
        def each_entry(ctx: Context) -> Iterator[Diagnostic]:
            for name, entry in getattr(ctx.stack, section).items():
                yield from (fn(ctx, name, entry, ctx.framework(entry)) if framework else fn(ctx, name, entry))
        each_entry.__name__, each_entry.__doc__ = fn.__name__, fn.__doc__
        return rule(each_entry)
    return register


def _ib_reason(sku: Sku) -> str:
    if sku.rdma and not sku.sriov:
        return f"{sku.name} has RDMA but no SR-IOV, so NCCL and MPI inside Azure ML cannot use its InfiniBand"
    return f"{sku.name} has no InfiniBand" + (f" ({sku.note.rstrip('.')})" if sku.note else "")


def _gpu_model(sku: Sku | None) -> str | None:
    """The GPU's model without its memory or board ("V100 16GB" -> "V100"): what makes two sizes the same class."""
    return sku.gpu_model.split()[0].upper() if sku is not None and sku.gpu_model else None


def _closest_first(ctx: Context, current: Sku | None, pool, cluster: Cluster | None = None) -> list[Sku]:
    """Suggested sizes ordered by closeness to the current one: the same GPU model first; then sizes with a published
    list price (validators/skus.yaml prices) before those without, since a price is what ranks a class (a size not
    yet priced, like GB200, is the newest and largest); then the same GPU count; then price per node-hour (a larger
    class costs more: a K80 or V100 user is never shown GB200 first); then the nearest GPU count, then name."""
    region = (cluster.location if cluster is not None and cluster.location else ctx.stack.workspace.location)
    tier = cluster.tier if cluster is not None else "dedicated"
    model = _gpu_model(current)

    def closeness(sku: Sku) -> tuple:
        price = ctx.catalog.ranking_price(sku.name, region, tier)
        gpus = abs(sku.gpus - current.gpus) if current is not None else 0
        return (model is None or _gpu_model(sku) != model, price is None, gpus != 0, price or 0.0, gpus, sku.name)
    return sorted(pool, key=closeness)


def _ib_sizes(ctx: Context, cluster_name: str) -> str:
    # current sizes only (a retiring size is no advice), with the GPUs the processes per node need (a
    # suggestion that distribution.gpus-exceeded refuses next is no advice either), closest to the cluster's first
    gpus, current = _gpus_needed(ctx, cluster_name), ctx.sku(cluster_name)
    cluster = ctx.stack.clusters.get(cluster_name)
    # a CPU cluster is pointed at the HPC sizes (HB, HC, HX) with all their cores, not the constrained-core ones
    parsed = parse_size_name(cluster.size) if current is None and cluster is not None else None
    cpu = current.gpus == 0 if current is not None else parsed is not None and not parsed.family.startswith("N")

    def fits(s: Sku) -> bool:
        if cpu:
            return s.gpus == 0 and getattr(parse_size_name(s.name), "active_vcpus", 0) is None
        return s.nccl_over_ib and s.gpus >= gpus
    pool = [s for s in ctx.catalog if s.infiniband_eligible and s.retirement_date is None and fits(s)]
    return ", ".join(s.name for s in _closest_first(ctx, current, pool, cluster))


def _gpus_needed(ctx: Context, cluster_name: str) -> int:
    """The most processes per node a distribution on the cluster starts one per GPU (per-node launches
    size themselves to the node): a size suggested for the cluster needs that many GPUs."""
    return max((d.processes_per_instance for d in ctx.stack.distributions.values()
                if d.cluster == cluster_name and d.type != "tensorflow" and not _launched_per_node(d)), default=0)


# ---- clusters -------------------------------------------------------------------------------------------

@rule
def resource_names(ctx: Context) -> Iterator[Diagnostic]:
    """Names Azure would refuse (validators/names.yaml), matched whole: `rg/../x`, `../../etc` and a name
    with a trailing newline never reach a URL or a path."""
    for r in name_rules():
        for name, path, is_key in r.names_in(ctx.stack):
            if not r.pattern.fullmatch(name):
                yield ctx.at(path, r.rule_id, f"{r.what} {name!r} is not a name Azure accepts",
                             f"use {r.rule} ({r.source})", key=is_key)


@rule
def output_references(ctx: Context) -> Iterator[Diagnostic]:
    """Each output refers to an address the stack declares and an attribute its type has (stack/outputs.py)."""
    yield from check_outputs(ctx.stack, ctx.loaded.source)


IMPORT_UNDECLARED = "import.undeclared"  # plan --generate-config-out writes the declaration instead


@rule
def import_blocks(ctx: Context) -> Iterator[Diagnostic]:
    """An import block names a cluster or environment of the stack under its Azure name, once."""
    seen: set[str] = set()
    for i, block in enumerate(ctx.stack.imports):
        kind, _, name = block.to.partition(".")
        section = f"{kind}s"
        if block.id != name:
            yield ctx.at(("import", i, "id"), "import.name-mismatch",
                         f"import of {block.to}: Azure's {kind} is {block.id!r}, but the stack would call it {name!r}; "
                         f"Azure ML cannot rename a {kind}, so infra names it by its Azure name",
                         f"write `to: {kind}.{block.id}` (and declare {section}.{block.id})")
        if block.to in seen:
            yield ctx.at(("import", i, "to"), "import.duplicate", f"{block.to} is imported twice",
                         "keep one import block for it")
        seen.add(block.to)
        declared = getattr(ctx.stack, section).get(name)
        if kind == "environment" and declared is not None and declared.curated:
            yield ctx.at(("import", i, "to"), "import.curated",
                         f"{block.to} is a curated environment: infra only reads it, there is nothing to import",
                         "remove the import block")
        if declared is None:
            yield ctx.at(("import", i, "to"), IMPORT_UNDECLARED,
                         f"import of {block.to}: the stack declares no {section}.{name}",
                         f"declare it, or let `infra plan {ctx.loaded.path.name} --generate-config-out FILE` write "
                         "its declaration from Azure and merge FILE into the stack")


@rule
def tags(ctx: Context) -> Iterator[Diagnostic]:
    """Azure Resource Manager's tag limits (validators/names.yaml), counting the tags infra adds itself."""
    limits = tag_limits()
    room = limits.max_tags - limits.infra_tags
    for section in ("clusters", "environments"):
        for name, resource in getattr(ctx.stack, section).items():
            path = (section, name, "tags")
            if len(resource.tags) > room:
                yield ctx.at(path, "tags.count",
                             f"{section[:-1]} {name!r} has {len(resource.tags)} tags; Azure allows {limits.max_tags} "
                             f"per resource and infra adds up to {limits.infra_tags} of its own",
                             f"keep at most {room} tags ({limits.source})", key=True)
            for tag, value in resource.tags.items():
                bad = sorted(set(tag) & set(limits.name_forbidden_characters))
                if len(tag) > limits.max_name_length or bad or not tag.strip():
                    why = (f"is longer than {limits.max_name_length} characters" if len(tag) > limits.max_name_length
                           else f"contains {' '.join(bad)}" if bad else "is empty")
                    yield ctx.at(path + (tag,), "tags.name", f"tag name {tag[:60]!r} {why}",
                                 f"tag names have 1-{limits.max_name_length} characters, none of "
                                 f"{' '.join(limits.name_forbidden_characters)} ({limits.source})", key=True)
                elif tag.lower().startswith(limits.reserved_prefix):
                    yield ctx.at(path + (tag,), "tags.reserved", f"tag name {tag!r} is reserved for infra's own tags",
                                 f"choose a name that does not start with {limits.reserved_prefix!r}", key=True)
                if len(value) > limits.max_value_length:
                    yield ctx.at(path + (tag,), "tags.value",
                                 f"the value of tag {tag[:60]!r} has {len(value)} characters; Azure allows "
                                 f"{limits.max_value_length}", f"shorten it ({limits.source})")


def _same_family(size: str, catalog: Catalog) -> list[str]:
    """Catalogued sizes of the same family by name (ND for ND, never ND for DS): where a did-you-mean may look."""
    parsed = parse_size_name(size)
    return catalog.family_names(parsed.family) if parsed else []


def _successors(retired: Sku, ctx: Context, cluster: Cluster) -> str:
    """Current sizes of the retired one's family with at least its GPUs, and InfiniBand where it had it or the
    cluster requires it (cluster_infiniband's test): an NC24rs_v3 user is pointed at an NC with InfiniBand,
    not at the catalog's largest ND, and no hint names a size the next check refuses."""
    needs_ib = retired.infiniband_eligible or cluster.infiniband == "required"

    def keeps(sku: Sku) -> bool:
        return (sku.retirement_date is None and sku.gpus >= retired.gpus
                and (sku.infiniband_eligible or not needs_ib))
    family = [s for s in map(ctx.catalog.get, _same_family(retired.name, ctx.catalog)) if s and keeps(s)]
    pool = family or [s for s in ctx.catalog if keeps(s) and s.gpus > 0 and s.accelerator == retired.accelerator]
    picks = _closest_first(ctx, retired, pool, cluster)[:3]
    return f", e.g. {', '.join(s.name for s in picks)}" if picks else " (`infra skus`)"


def _retirement(sku: Sku) -> str:
    day = sku.retirement_date
    when = "" if day is None or day == datetime.date.min else f" on {day.isoformat()}"
    return when + (f" ({sku.retirement_source})" if sku.retirement_source else "")


@rule_for_each("clusters")
def cluster_size(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    path = ("clusters", name, "size")
    sku = ctx.catalog.get(cluster.size)
    if sku is None:
        parsed = parse_size_name(cluster.size)
        family = {n.lower(): n for n in _same_family(cluster.size, ctx.catalog)}  # Azure reads names in any case
        close = [family[c] for c in difflib.get_close_matches(cluster.size.lower(), list(family), n=1, cutoff=0.75)]
        mean = f"did you mean {close[0]!r}? " if close else ""
        if parsed is None:
            yield ctx.at(path, "cluster.size-unknown",
                         f"size {cluster.size!r} is not an Azure VM size name (Standard_<family><vCPUs><features>"
                         "[_<accelerator>][_v<version>])",
                         mean + "see `infra skus` or https://learn.microsoft.com/azure/virtual-machines/sizes/overview")
        elif parsed.gpu_or_hpc:  # the catalog sets out to cover these families: a gap worth saying
            rdma = "an RDMA size (`r`), SR-IOV unconfirmed" if parsed.rdma else "no RDMA (no `r` in its name)"
            yield ctx.warning(path, "cluster.size-unknown",
                         f"size {cluster.size!r} is not in the SKU catalog; judged by its name: {parsed.family} family, "
                         f"{rdma}", mean + "add the size to validators/skus.yaml (with its source) so its GPUs and "
                         "InfiniBand can be checked")
    elif sku.retired_as_of(ctx.today):
        # Azure creates no new VM of a retired size; a cluster that exists keeps its nodes until Azure
        # deallocates them. Offline nothing says it exists: `infra plan` downgrades this for a live cluster.
        yield ctx.at(path, "cluster.size-retired",
                     f"{sku.name} was retired by Azure{_retirement(sku)}: a new cluster of this size cannot be created",
                     f"choose a current size{_successors(sku, ctx, cluster)} "
                     "(`infra plan` reports a cluster that already exists as a warning)")
    elif sku.retiring_as_of(ctx.today):
        yield ctx.warning(path, "cluster.size-retiring",
                     f"Azure retires {sku.name}{_retirement(sku)}; the cluster stops working then",
                     "plan the move to a current size (`infra skus`)")


@rule_for_each("clusters")
def cluster_infiniband(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    if cluster.infiniband != "required":
        return
    path = ("clusters", name, "size")
    sku = ctx.catalog.get(cluster.size)
    parsed = parse_size_name(cluster.size) if sku is None else None
    if sku is not None and not sku.infiniband_eligible:
        yield ctx.at(path, "cluster.infiniband-ineligible",
                     f"cluster {name!r} requires InfiniBand but {_ib_reason(sku)}",
                     f"use an SR-IOV InfiniBand size ({_ib_sizes(ctx, name)}) or set "
                     "`infiniband: optional`")
    elif parsed is not None and not parsed.rdma:
        yield ctx.at(path, "cluster.infiniband-ineligible",
                     f"cluster {name!r} requires InfiniBand but {cluster.size} has no `r` (RDMA) in its name",
                     f"use an SR-IOV InfiniBand size ({_ib_sizes(ctx, name)}) or set "
                     "`infiniband: optional`")
    elif parsed is not None:
        yield ctx.warning(path, "cluster.infiniband-unverified",
                     f"cluster {name!r} requires InfiniBand; {cluster.size} is an RDMA size by its name, but "
                     "whether NCCL and MPI can use it (SR-IOV) is unconfirmed: NC24r-class sizes cannot",
                     "add the size to validators/skus.yaml with its sriov fact, or prove it with `infra smoke`")


@rule_for_each("clusters")
def cluster_ssh(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    ssh = cluster.ssh_settings
    if cluster.ssh_public_access_enabled and not (ssh and ssh.admin_username and (ssh.ssh_key_value or ssh.admin_password)):
        # Azure ML accepts it (azure-ai-ml sends it; Azure's recorded GETs show clusters so): the port opens, and
        # with no admin user and credential nobody can log in through it
        yield ctx.warning(("clusters", name, "ssh_public_access_enabled"), "cluster.ssh-settings",
                     f"cluster {name!r} opens the nodes' SSH port without an admin user and key: Azure ML creates it, "
                     "and nobody can log in",
                     "add ssh_settings: {admin_username: ..., ssh_key_value: ${SSH_PUBLIC_KEY}}, or remove "
                     "ssh_public_access_enabled")


@rule_for_each("clusters")
def cluster_ssh_secret_inline(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    if cluster.ssh_settings is None or cluster.ssh_settings.admin_password is None:
        return
    path = ("clusters", name, "ssh_settings", "admin_password")
    if path not in ctx.loaded.source.interpolated:
        yield ctx.warning(path, "cluster.ssh-password-inline",
                     f"cluster {name!r} has its SSH admin password written in the stack file, where anyone who "
                     "reads the file (or its git history) has it",
                     "write admin_password: ${NODE_ADMIN_PASSWORD} and set that variable where infra runs, "
                     "or use ssh_key_value instead")


@rule_for_each("clusters")
def cluster_location(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    ws = ctx.stack.workspace.location
    if cluster.location and cluster.location.replace(" ", "").lower() != ws:
        yield ctx.warning(("clusters", name, "location"), "cluster.location",
                     f"cluster {name!r} is in {cluster.location} but the workspace is in {ws}",
                     "remove `location` (clusters default to the workspace's region) unless cross-region compute is intended")


@rule_for_each("clusters")
def cluster_node_public_ip(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    if not cluster.enable_node_public_ip and not (cluster.network_settings and cluster.network_settings.subnet):
        # Azure ML decides by the workspace: with a managed virtual network (isolation mode AllowInternetOutbound
        # or AllowOnlyApprovedOutbound) the nodes live in it and need no subnet (Microsoft's how-to creates such a
        # cluster with `--set enable_node_public_ip=False`); without one it refuses. Offline the workspace is not
        # known: a warning here, and `infra plan` reads the workspace's isolation mode (an error where it has none).
        yield ctx.warning(("clusters", name, "enable_node_public_ip"), "cluster.public-ip-without-subnet",
                     f"cluster {name!r} turns node public IPs off without a subnet: Azure ML creates it only in a "
                     "workspace with a managed virtual network (`infra plan` reads the workspace's)",
                     "in a workspace without a managed network add network_settings: {subnet: ...} (see "
                     "https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet); with one, "
                     "nothing to do (https://learn.microsoft.com/azure/machine-learning/how-to-managed-network-compute)")


@rule_for_each("clusters")
def cluster_subnet_needs_vnet(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    net = cluster.network_settings
    if net and net.subnet and not net.vnet_name and not net.subnet.startswith("/"):
        # A subnet name means nothing without its virtual network: the SDK would send
        # .../virtualNetworks/None/subnets/NAME, and Azure answers a full ARM id either way.
        yield ctx.at(("clusters", name, "network_settings", "subnet"), "cluster.subnet-without-vnet",
                     f"cluster {name!r} names subnet {net.subnet!r} without its virtual network",
                     "add network_settings.vnet_name, or give the subnet's full ARM id (/subscriptions/.../"
                     "virtualNetworks/VNET/subnets/NAME), see https://learn.microsoft.com/azure/machine-learning/"
                     "reference-yaml-compute-aml")


def _pasted_name(ctx: Context, section: str, key: str, written: str | None, what: str,
                 rule: str) -> Iterator[Diagnostic]:
    """A pasted Azure ML YAML's `name:` equals its key: one name per resource, the plan address (KIND.KEY) and
    the name in Azure ML."""
    if written is not None and written != key:
        kind = section[:-1]
        yield ctx.at((section, key, "name"), rule,
                     f"{kind} {key!r} says name: {written!r}; a pasted {what} YAML's name must equal its key under "
                     f"{section}:", f"rename the key to {written!r} or remove `name:`")


@rule_for_each("clusters")
def cluster_compute_name(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    yield from _pasted_name(ctx, "clusters", name, cluster.name, "compute", "cluster.name-mismatch")


# ---- environments ---------------------------------------------------------------------------------------

@rule_for_each("environments")
def environment_name(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    yield from _pasted_name(ctx, "environments", name, env.name, "environment", "environment.name-mismatch")


def build_template_provides(name: str) -> dict[str, str | None] | None:
    """What an image built from templates/docker/NAME provides (its template.yaml), or None if unknown."""
    data = template_meta(name)
    if data is None:
        return None
    provides: dict[str, str | None] = {}
    for spec in data.get("provides") or []:
        req = parse_requirement(spec)
        provides[req.name] = req.version
    return provides


def build_template_pip_extras(name: str) -> dict[str, tuple[str, ...]]:
    """What the template installs beside a pip package it is asked for (template.yaml `pip_extras`)."""
    data = template_meta(name) or {}
    return {pkg: tuple(more) for pkg, more in (data.get("pip_extras") or {}).items()}


@rule_for_each("environments")
def environment_requires(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    for i, spec in enumerate(env.requires):
        try:
            parse_requirement(spec)
        except SpecError as exc:
            yield ctx.at(("environments", name, "requires", i), "environment.requires-spec", str(exc),
                         "write a spec such as openmpi>=4.1, mpi, ibverbs, nccl>=2.18")


def _outside_project(ctx: Context, path: tuple, what: str, relative: str) -> Diagnostic | None:
    """A file the stack names must resolve, symlinks and `..` included, inside the stack's project: apply
    uploads it and render copies it, so `../../.ssh/id_rsa` or a link to /etc would leave the machine."""
    root = project_root(ctx.loaded.path)
    if inside(ctx.loaded.base_dir / relative, root):
        return None
    return ctx.at(path, "paths.outside-project",
                  f"{what} {relative!r} resolves to {(ctx.loaded.base_dir / relative).resolve()}, outside the stack's "
                  f"project {root}", "keep the files a stack names inside its project (the git work tree that holds "
                  "the stack, else the stack's directory); copy them in instead of linking out")


# What Azure ML takes in one snapshot of a job's source directory: 300 MB and 2,000 files
# (https://learn.microsoft.com/azure/machine-learning/how-to-save-write-experiment-files?view=azureml-api-1#storage-limits-of-experiment-snapshots).
# A build context or code directory past either is uploaded whole before each build or job: a warning.
UPLOAD_WARN_BYTES = 300 * 1000 * 1000
UPLOAD_WARN_FILES = 2000
_UPLOAD_LIMITS_SOURCE = ("https://learn.microsoft.com/azure/machine-learning/how-to-save-write-experiment-files"
                         "?view=azureml-api-1#storage-limits-of-experiment-snapshots")


def _skipped_entries(ctx: Context, path: tuple, what: str, directory: Path) -> Iterator[Diagnostic]:
    listing = context_files(directory)
    size = 0
    for f in listing.files:   # sizes from the file system (a sparse file counts as what would be uploaded)
        try:
            size += f.source.stat().st_size
        except OSError:
            pass
    if size > UPLOAD_WARN_BYTES or len(listing.files) > UPLOAD_WARN_FILES:
        yield ctx.warning(path, "paths.context-large",
                          f"{what} {directory} holds {len(listing.files)} files, {size / 1e6:,.0f} MB: more than the "
                          f"{UPLOAD_WARN_BYTES // 1000 ** 2} MB or {UPLOAD_WARN_FILES:,} files Azure ML takes in a "
                          f"snapshot ({_UPLOAD_LIMITS_SOURCE}), uploaded whole before every build or job",
                          "keep data and checkpoints out of it (list them in its .amlignore) and read them from a "
                          "datastore instead")
    if listing.skipped:
        more = len(listing.skipped) - 5
        shown = "; ".join(listing.skipped[:5]) + (f"; and {more} more" if more > 0 else "")
        yield ctx.warning(path, "paths.context-skipped", f"{what} {directory} has entries that are not uploaded: {shown}",
                     "symlinks are never followed out of a context (nor into directories); copy what is needed "
                     "into it, or list the entries in its .amlignore")


def _context_diagnostics(ctx: Context, path: tuple, context: Path, dockerfile_path: str) -> Iterator[Diagnostic]:
    if not inside(context / dockerfile_path, context):
        yield ctx.at(path[:-1] + ("dockerfile_path",), "paths.outside-context",
                     f"dockerfile_path {dockerfile_path!r} lies outside the build context {context}",
                     "Azure ML builds only from the uploaded context: put the Dockerfile inside build.path")
        return
    yield from _skipped_entries(ctx, path, "build context", context)


@rule_for_each("environments")
def environment_files(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    base = ctx.loaded.base_dir
    if env.conda_path:  # conda YAML written inline is no file
        where = ("environments", name, "conda_file")
        outside = _outside_project(ctx, where, "conda_file", env.conda_path)
        if outside is not None:
            yield outside
        elif not (base / env.conda_path).is_file():
            yield ctx.at(where, "environment.file-missing",
                         f"conda file {env.conda_path!r} does not exist (looked in {base})",
                         "conda_file is relative to the stack file, or write the conda YAML inline under it")
        else:
            for d in conda_document(base / env.conda_path, project_root(ctx.loaded.path))[1][:1]:
                place = ":".join(str(p) for p in (d.file, d.line, d.column) if p is not None)
                yield ctx.at(where, "environment.conda-file", f"conda file {env.conda_path!r} is refused: "
                             f"{d.message} (at {place})", d.hint or "fix the conda file")
    if env.build and env.build.path:
        where = ("environments", name, "build", "path")
        context = base / env.build.path
        outside = _outside_project(ctx, where, "build.path", env.build.path)
        if outside is not None:
            yield outside
        elif not context.is_dir():
            yield ctx.at(where, "environment.file-missing",
                         f"build context {env.build.path!r} is not a directory (looked in {base})",
                         "build.path is relative to the stack file")
        elif not (context / env.build.dockerfile_path).is_file():
            # Azure ML uploads the whole directory before it finds there is nothing to build.
            yield ctx.at(where, "environment.file-missing",
                         f"build context {env.build.path!r} has no {env.build.dockerfile_path} "
                         f"(looked for {context / env.build.dockerfile_path})",
                         "point build.path at the directory that holds the Dockerfile, or set build.dockerfile_path")
        else:
            yield from _context_diagnostics(ctx, where, context, env.build.dockerfile_path)
    if env.build and env.build.template:
        yield from _template_name(ctx, name, env.build.template)


def _template_name(ctx: Context, name: str, template: str) -> Iterator[Diagnostic]:
    """build.template names a folder of templates/docker/ (never a path: `../../x` would load a Dockerfile.j2,
    and its `provides:`, from anywhere), and one that exists."""
    try:
        template_dir(template)
    except DiagnosticError as exc:
        yield ctx.at(("environments", name, "build", "template"), "environment.template-name",
                     exc.diagnostics[0].message, TEMPLATE_NAME_HINT)
        return
    if build_template_provides(template) is None:
        known = described_templates()
        yield ctx.at(("environments", name, "build", "template"), "environment.template-unknown",
                     f"no Dockerfile template named {template!r} in templates/docker/",
                     f"known templates: {', '.join(known) or '(none)'}")


@rule_for_each("distributions")
def code_paths(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    if dist.code:
        where = ("distributions", name, "code")
        outside = _outside_project(ctx, where, "code", dist.code)
        if outside is not None:
            yield outside
        elif (ctx.loaded.base_dir / dist.code).is_dir():  # `az ml job create` would follow its links out
            yield from _skipped_entries(ctx, where, "code directory", ctx.loaded.base_dir / dist.code)


@rule_for_each("environments")
def environment_template_parameters(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    if not (env.build and env.build.template) or build_template_provides(env.build.template) is None:
        return  # no template: environment_files reports it
    """Each parameter held to the grammar its template.yaml names (an image reference, PEP 508, a version,
    a URL, ...; no control characters), pointed at the value at fault: nothing reaches a Dockerfile as code."""
    try:
        _, problems = parameter_problems(env.build.template, dict(env.build.parameters))
    except DiagnosticError as exc:  # a broken template.yaml: its own diagnostic
        yield from exc.diagnostics
        return
    for p in problems:
        yield ctx.at(("environments", name, "build", "parameters", *p.where), "environment.template-parameters",
                     p.message, p.hint)


@rule_for_each("environments")
def environment_build_steps(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    """A build context's Dockerfile whose RUN step needs what neither its base image nor an earlier step provides
    (a compiler and MPI's and Python's headers to build mpi4py, torch before DeepSpeed) fails Azure ML's build:
    an error at the step's line (validate/build_steps.py; validators/base_images.yaml). A template's Dockerfile
    is judged where it is rendered (plan, render)."""
    if not (env.build and env.build.path):
        return
    context = ctx.loaded.base_dir / env.build.path
    dockerfile = context / env.build.dockerfile_path
    text = _project_text(dockerfile, project_root(ctx.loaded.path)) if inside(dockerfile, context) else None
    for p in build_step_problems(text) if text else ():
        yield Diagnostic("error", "environment.build-step", p.message, str(dockerfile), p.line, 1, p.hint)


@rule_for_each("environments")
def environment_image_reference(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    """`image:` held to the OCI reference grammar: Azure ML writes it after FROM in the Dockerfile it builds
    for an image with a conda file, so a newline in it would be a second instruction."""
    problem = image_reference_problem(env.image) if env.image is not None else None
    if problem:
        yield ctx.at(("environments", name, "image"), "environment.image-reference", problem,
                     f"write {REFERENCE_GRAMMAR}, e.g. mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest")


# ---- distributions --------------------------------------------------------------------------------------

# A command job's expression bindings: ${{inputs.NAME}} and ${{outputs.NAME}}
# (https://learn.microsoft.com/azure/machine-learning/reference-yaml-job-command#expression-syntax-for-configuring-azure-ml-job-inputs-and-outputs).
_JOB_BINDING = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z0-9_.-]*?)\s*\}\}")


@rule_for_each("distributions")
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
        yield _command_at(
            ctx, name, "distribution.job-binding",
            f"the command of distribution {name!r} names ${{{{{kind}.{key}}}}}, but its {kind} declare no "
            f"{key!r} (declared: {listed}); Azure ML refuses the job",
            (f"did you mean ${{{{{kind}.{close[0]}}}}}? " if close else "")
            + f"declare it under `{kind}:` in the distribution (as in the job's YAML: {kind}: {{{key}: VALUE}})")


@rule_for_each("distributions")
def distribution_job_inputs(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """Each input is written as a job passes it (validate/job_inputs.py): azure-ai-ml's load_job refuses the job
    file otherwise, so `infra render` could not write one Azure ML takes."""
    for key, value in dist.inputs.items():
        problem = input_problem(key, value)
        if problem is not None:
            where = ("distributions", name, "inputs", key) + ((problem.key,) if problem.key else ())
            yield ctx.at(where, "distribution.job-input",
                         f"input {key!r} of distribution {name!r} {problem.message}", problem.hint)


@rule_for_each("distributions")
def distribution_job_services(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """Each entry of `services:` carries only the keys azure-ai-ml reads (validators/job_schema.yaml
    `services`, from the pinned azure-ai-ml's own schema): it refuses the job file otherwise."""
    known = job_schema().services
    for service, entry in dist.services.items():
        if not isinstance(entry, dict):
            yield ctx.at(("distributions", name, "services", service), "distribution.job-key",
                         f"service {service!r} of distribution {name!r} must be a mapping ({{type: ..., nodes: ...}})",
                         f"write it as Azure ML's job YAML does: {service}: {{type: vs_code, nodes: all}}")
            continue
        for key in entry:
            if key in known:
                continue
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.4) if key != "job_service_type" \
                else ["type"]  # the preview schema's name of `type`
            yield ctx.at(("distributions", name, "services", service, key), "distribution.job-key",
                         f"service {service!r} of distribution {name!r} has key {key!r}, which azure-ai-ml "
                         f"{job_schema().azure_ai_ml} does not read (it refuses the job: \"Unknown field\")",
                         (f"did you mean {close[0]!r}? " if close else "")
                         + f"a service takes {', '.join(k for k in known if not k.startswith('$'))}", key=True)


# A command job's identity types as azure-ai-ml reads them, in snake or camel case (its job schema,
# https://github.com/Azure/azure-sdk-for-python/blob/main/sdk/ml/azure-ai-ml/azure/ai/ml/_schema/job/identity.py).
JOB_IDENTITY_TYPES = ("user_identity", "managed", "managed_identity", "aml_token")


@rule_for_each("distributions")
def distribution_identity(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    if dist.identity is None:
        return
    kind = dist.identity.get("type")
    known = {t.replace("_", "") for t in JOB_IDENTITY_TYPES}   # UserIdentity, AMLToken, Managed read too
    if not (isinstance(kind, str) and kind.replace("_", "").lower() in known):
        where = ("distributions", name, "identity") + (("type",) if "type" in dist.identity else ())
        yield ctx.at(where, "distribution.identity-type",
                     f"distribution {name!r} has identity type {short_repr(kind)}, which Azure ML does not read "
                     "(it refuses the job)", "write identity: {type: user_identity} (or managed, managed_identity, aml_token)")


@rule_for_each("distributions")
def distribution_references(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    for section, ref in (("clusters", dist.cluster), ("environments", dist.environment)):
        known = list(getattr(ctx.stack, section))
        if ref not in known:
            close = difflib.get_close_matches(ref, known, n=1)
            field = section[:-1]
            yield ctx.at(("distributions", name, field), "distribution.dangling-reference",
                         f"distribution {name!r} names {field} {ref!r}, which the stack does not declare",
                         (f"did you mean {close[0]!r}? " if close else "") +
                         (f"declared: {', '.join(known)}" if known else f"declare it under `{section}:`"))


def _multinode_transport(ctx: Context, cluster: Cluster) -> tuple[str, str | None, str] | None:
    """(why the cluster gives no InfiniBand to NCCL/MPI, why that is an error: "required", "fabric" or None for a
    warning, the transport between nodes)
    for a cluster whose size has none, None where it has (or the name says nothing). Errors are what Azure ML
    or the stack forbids: a cluster that requires InfiniBand, an RDMA size without SR-IOV (NCCL and MPI cannot
    use its fabric, the how-to-train-distributed-gpu guide's NC24r). Otherwise TCP sockets are a performance
    matter: a warning for GPUs, and nothing at all for CPU jobs, which run across nodes over TCP (gloo, MPI)."""
    required = cluster.infiniband == "required"
    sku = ctx.catalog.get(cluster.size)
    if sku is not None:
        if sku.infiniband_eligible:
            return None
        fabric_unusable = sku.rdma and not sku.sriov
        if sku.gpus == 0 and not (required or fabric_unusable):
            return None
        return _ib_reason(sku), "fabric" if fabric_unusable else "required" if required else None, \
            sku.sockets_between_nodes
    parsed = parse_size_name(cluster.size)
    if parsed is None or parsed.rdma or (not parsed.family.startswith("N") and not required):
        return None  # size-unknown says the name is wrong; infiniband-unverified judges an `r` size; a CPU size
    return (f"{cluster.size} has no `r` (RDMA) in its name, so no InfiniBand", "required" if required else None,
            "TCP sockets on Ethernet (its bandwidth not in the catalog)")


@rule_for_each("distributions")
def distribution_infiniband(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    cluster = ctx.stack.clusters.get(dist.cluster)
    if cluster is None or dist.instance_count < 2:
        return
    path = ("distributions", name, "instance_count")
    parsed = parse_size_name(cluster.size) if ctx.sku(dist.cluster) is None else None
    if parsed is not None and parsed.rdma:
        yield ctx.warning(path, "distribution.infiniband-unverified",
                     f"distribution {name!r} spans {dist.instance_count} nodes of {cluster.size}, an RDMA size "
                     "by its name (`r`) that the catalog does not know: whether NCCL and MPI can use its "
                     "InfiniBand (SR-IOV) is unconfirmed",
                     "add the size to validators/skus.yaml with its sriov fact, or prove it with `infra smoke`")
        return
    found = _multinode_transport(ctx, cluster)
    if found is None:
        return
    reason, error, transport = found
    ib = ctx.catalog.gpu_infiniband_gbps()
    against = f" against {ib[0]:,}-{ib[1]:,} Gb/s of InfiniBand per VM on the InfiniBand GPU sizes" if ib else ""
    message = (f"distribution {name!r} spans {dist.instance_count} nodes of cluster {dist.cluster!r}, but {reason}: "
               f"inter-node traffic goes over {transport}{against}, so scaling across nodes stays far from linear")
    sizes = _ib_sizes(ctx, dist.cluster)
    sku = ctx.sku(dist.cluster)
    figures = ("figures: validators/skus.yaml" + (f", {sku.name}'s Ethernet from {sku.source.split()[0]}"
                                                   if sku is not None and sku.ethernet_gbps else "")
               + ", the InfiniBand sizes' from their sources")
    if error:
        yield ctx.at(path, "distribution.multinode-without-infiniband", message,
                     f"use an SR-IOV InfiniBand size ({sizes}) or run on one node"
                     + ("" if error != "required" else
                        f", or set `infiniband: optional` on cluster {dist.cluster!r} to accept TCP sockets")
                     + f" ({figures})")
    else:
        yield ctx.warning(path, "distribution.multinode-without-infiniband", message,
                     f"for near-linear scaling use an InfiniBand size ({sizes}), or run on one node; the job runs "
                     f"as it is, slower ({figures})")


def _cpu_environment(ctx: Context, dist: Distribution) -> bool:
    """The distribution's environment is a curated one built for CPUs (curated_environments.yaml `gpu: false`)."""
    env = ctx.stack.environments.get(dist.environment)
    info = curated_info(env.curated) if env is not None and env.curated else None
    return info is not None and not info.gpu


@rule_for_each("distributions")
def distribution_gpus(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    sku = ctx.sku(dist.cluster)
    if sku is None or dist.type == "tensorflow":
        return
    per_node = dist.processes_per_instance
    path = ("distributions", name, "process_count_per_instance")
    if _launched_per_node(dist):
        return  # torchrun/Lightning start one process per GPU themselves (see distribution_launcher)
    if sku.gpus == 0 and dist.type == "mpi" and sku.infiniband_eligible:
        return  # CPU MPI on an HPC size (HB, HC, HX: InfiniBand over SR-IOV, no GPUs) is what they are for
    if sku.gpus == 0 and _cpu_environment(ctx, dist):
        return  # a CPU environment on a CPU size (azure-ai-ml's dist_job_1/2: sklearn ...-cpu on Standard_DS3_v2)
    if sku.gpus == 0:
        yield ctx.warning(("distributions", name, "cluster"), "distribution.no-gpus",
                     f"{sku.name} has no GPUs; distribution {name!r} will train on CPU",
                     "use a GPU size for GPU training; for CPU training use type: mpi on an HPC size (HB, HC, HX: InfiniBand)")
    elif per_node > sku.gpus:
        yield ctx.at(path, "distribution.gpus-exceeded",
                     f"process_count_per_instance {per_node} exceeds the {sku.gpus} GPU(s) of {sku.name}",
                     f"set process_count_per_instance: {sku.gpus} (one process per GPU)")
    elif per_node < sku.gpus:
        yield ctx.warning(path, "distribution.gpus-underused",
                     f"process_count_per_instance {per_node} uses {per_node} of the {sku.gpus} GPUs of {sku.name}",
                     f"set process_count_per_instance: {sku.gpus} to use every GPU you pay for")


@rule_for_each("distributions")
def distribution_instances(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    cluster = ctx.stack.clusters.get(dist.cluster)
    if cluster is not None and dist.instance_count > cluster.max_instances:
        yield ctx.at(("distributions", name, "instance_count"), "distribution.instance-count",
                     f"instance_count {dist.instance_count} exceeds max_instances {cluster.max_instances} "
                     f"of cluster {dist.cluster!r}: the job would queue forever",
                     f"raise clusters.{dist.cluster}.max_instances to {dist.instance_count} or lower instance_count")


@dataclass(frozen=True)
class Carries:
    """What an environment is known to carry (requirement profiles: openmpi, mpi, deepspeed, mpi4py...)."""

    provides: frozenset[str]
    complete: bool   # True: what is not listed is absent (a custom image carries only what it declares)
    evidence: str
    package_files: tuple[str, ...] = ()   # conda/pip files read for what they install (a package goes there)


def _declared(env: Environment) -> set[str]:
    return {parse_requirement(s).name for s in env.requires if _parses(s)}


_pip_name = pip_name


_READ_LIMIT = 1_000_000  # bytes of a conda file or training script read for what it names


def _project_text(path: Path, root: Path) -> str | None:
    """The start of a regular file inside the stack's project (never through a symlink out of it), or None."""
    if not (inside(path, root) and path.is_file()):
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read(_READ_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        return None


def conda_document(path: Path, root: Path) -> tuple[object, list[Diagnostic]]:
    """A conda file read as the stack itself is (stack/source.py): nesting, values and the text its aliases
    expand to bounded, so a small file of YAML aliases cannot keep validate walking for minutes; `${` is text.
    Returns (the document, or None; the loader's diagnostics when it refused the file)."""
    text = _project_text(path, root)
    if not text or not text.strip():
        return None, []
    data, refused = _conda_yaml(text, str(path))
    return data, list(refused)


@lru_cache(maxsize=8)
def _conda_yaml(text: str, file: str) -> tuple[object, tuple[Diagnostic, ...]]:
    """Read once per content: the rules that look at an environment's conda file share the reading (read only)."""
    try:
        return load_yaml(text, file, interpolate=False)[0], ()
    except DiagnosticError as exc:
        return None, tuple(exc.diagnostics)


def _conda_packages(path: Path, root: Path) -> set[str]:
    """Package names a conda file installs (conda and pip sections); nothing if it cannot be read."""
    data, _ = conda_document(path, root)
    return _conda_document_packages(data)


def _conda_document_packages(data: Any) -> set[str]:
    """Package names a conda YAML document (read from a file, or written inline) installs."""
    out: set[str] = set()
    deps = data.get("dependencies") if isinstance(data, dict) else None
    for dep in deps if isinstance(deps, list) else []:
        if isinstance(dep, str):
            out.add(_pip_name(dep.split("::")[-1]))
        elif isinstance(dep, dict):
            pip = dep.get("pip")
            out.update(_pip_name(p) for p in (pip if isinstance(pip, list) else []) if isinstance(p, str))
    return out


def _pip_requirements(path: Path, root: Path) -> set[str]:
    """Package names a pip requirements file installs (options, -r includes and comments skipped)."""
    text = _project_text(path, root) or ""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return {_pip_name(line) for line in lines if line and not line.startswith("-")}


def _build_context_carries(env: Environment, base_dir: Path, root: Path) -> tuple[set[str], str, list[str]]:
    """What an image built from a `build: {path}` context carries: its Dockerfile's final base image as
    curated_environments.yaml knows it, the conda and pip files it copies in, and what `RUN pip install` names.
    Returns (provides, evidence, the package files read, relative to the stack)."""
    context = base_dir / env.build.path
    dockerfile = context / env.build.dockerfile_path
    text = _project_text(dockerfile, root) if inside(dockerfile, context) else None
    if text is None:
        return set(), "a custom image carries only what it declares", []
    facts = read_dockerfile(text)
    provides = {_pip_name(p) for p in facts.pip_installs}
    evidence = f"{env.build.path}/{env.build.dockerfile_path} builds FROM {facts.base_image or 'an unknown base'}"
    image = image_info(facts.base_image) if facts.base_image else None
    if image is not None:
        provides |= set(image.provides)
        evidence += f" ({image.source})"
    files = []
    for copied in facts.copied:
        source = context / copied
        if not (inside(source, context) and source.is_file()):
            continue
        name = source.name.lower()
        if name.endswith((".yml", ".yaml")):
            provides |= _conda_packages(source, root)
        elif name.endswith(".txt") and "requirement" in name:
            provides |= _pip_requirements(source, root)
        else:
            continue
        files.append(posixpath.normpath(f"{env.build.path}/{copied}"))
    return provides, evidence, files


def environment_carries(env: Environment, base_dir: Path, root: Path) -> Carries:
    """What the environment carries, from validators/curated_environments.yaml (curated environments and
    AzureML base images), our Dockerfile templates, a conda file and the environment's own `requires:`."""
    declared = _declared(env)
    if env.curated:
        info = curated_info(env.curated)
        if info is None:
            return Carries(frozenset(declared), False,
                           f"curated environment {env.curated!r} is not in validators/curated_environments.yaml")
        return Carries(frozenset(info.provides) | declared, False, info.source)
    provides = set(declared)
    evidence = "declared in requires" if declared else "a custom image carries only what it declares"
    if env.image:
        image = image_info(env.image)
        if image is not None:
            provides |= set(image.provides)
            evidence = image.source
    if env.build and env.build.template:
        template = build_template_provides(env.build.template) or {}
        provides |= set(template)
        pip = {_pip_name(p) for p in (env.build.parameters.get("pip_packages") or []) if isinstance(p, str)}
        provides |= pip | {extra for p in pip for extra in build_template_pip_extras(env.build.template).get(p, ())}
        evidence = f"templates/docker/{env.build.template} installs it"
    files: list[str] = []
    if env.build and env.build.path:
        built, evidence, files = _build_context_carries(env, base_dir, root)
        provides |= built
    if env.conda_path and _project_text(base_dir / env.conda_path, root) is not None:
        provides |= _conda_packages(base_dir / env.conda_path, root)
        files.append(env.conda_path)
    elif isinstance(env.conda_file, dict):
        provides |= _conda_document_packages(env.conda_file)
        files.append("the environment's inline conda_file")
    return Carries(frozenset(provides), True, evidence, tuple(files))


def _parses(spec: str) -> bool:
    try:
        parse_requirement(spec)
        return True
    except SpecError:
        return False


@rule_for_each("distributions", framework=True)
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
        yield ctx.at(("distributions", name, "environment"), "distribution.mpi-missing",
                     f"{why}, but environment {dist.environment!r} is not known to carry an MPI "
                     f"({carries.evidence})",
                     (f"build FROM an AzureML Open MPI base image (mcr.microsoft.com/azureml/openmpi4.1.0-...) in "
                      f"{posixpath.normpath(env.build.path + '/' + env.build.dockerfile_path)}, or install an MPI "
                      f"there and declare `requires: [openmpi>=4.1]` on environments.{dist.environment} (checked "
                      "by `infra image check`)") if env.build and env.build.path else
                     f"add `requires: [openmpi>=4.1]` to environments.{dist.environment} (and check it with "
                     "`infra image check`), use a curated GPU environment or an mcr.microsoft.com/azureml/openmpi* "
                     "base image, or build it from infra's template: `build: {template: openmpi-rdma}`")
    else:
        yield ctx.warning(("distributions", name, "environment"), "distribution.mpi-unverified",
                     f"{why}; whether environment {dist.environment!r} carries an MPI is unknown: "
                     f"{carries.evidence}",
                     "declare `requires: [openmpi]` on the environment so `infra image check` can prove it")


@rule_for_each("distributions", framework=True)
def distribution_packages(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    """DeepSpeed under MPI needs deepspeed and mpi4py, Horovod needs horovod (frameworks.yaml)."""
    env = ctx.stack.environments.get(dist.environment)
    wanted = (fw.packages_with_type or {}).get(dist.type, ()) if fw else ()
    if env is None or not wanted:
        return
    carries = environment_carries(env, ctx.loaded.base_dir, project_root(ctx.loaded.path))
    missing = [p for p in wanted if p not in carries.provides]
    if not missing:
        return
    what = f"{fw.name} under type {dist.type} imports {', '.join(wanted)} on every rank"
    listed = ", ".join(missing)
    hint = (f"add `requires: [{', '.join(wanted)}]` to environments.{dist.environment} (checked by "
            f"`infra image check`){', or build it from templates/docker/openmpi-rdma with pip_packages: [deepspeed] (it adds mpi4py)' if fw.name == 'deepspeed' else ''}")
    if carries.package_files:   # the files were read: the package goes there (requires would only silence it)
        hint = (f"add {listed} to {' or '.join(carries.package_files)} (the environment installs what it lists); "
                "`requires:` would only declare it, not install it")
    if carries.complete:
        yield ctx.at(("distributions", name, "environment"), "distribution.packages-missing",
                     f"{what}, but environment {dist.environment!r} is not known to carry {listed} "
                     f"({carries.evidence})", hint)
    else:
        yield ctx.warning(("distributions", name, "environment"), "distribution.packages-unverified",
                     f"{what}; whether environment {dist.environment!r} carries {listed} is unknown "
                     f"({carries.evidence})", hint)


@rule_for_each("distributions", framework=True)
def distribution_framework(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    if fw is None:
        return
    if dist.type not in fw.types:
        yield ctx.at(("distributions", name, "type"), "distribution.framework-type",
                     f"framework {fw.name} does not run under distribution type {dist.type}",
                     f"use type: {' or '.join(fw.types)} ({fw.source})")
    if dist.launcher not in fw.launchers:
        declared = ("distributions", name, "launcher") in ctx.loaded.source.keys
        yield ctx.at(("distributions", name, "launcher" if declared or not dist.command else "command"),
                     "distribution.framework-launcher",
                     f"framework {fw.name} is not launched {dist.launcher}"
                     + ("" if declared else " (the command's launcher starts processes per node)"),
                     f"use launcher: {' or '.join(fw.launchers)}" if declared else
                     f"launch {fw.name} {' or '.join(fw.launchers)}: e.g. `command: python train.py` with "
                     "process_count_per_instance set to the GPUs per node")


# ---- the command: what it launches (stack/launch.py reads it; validators/launchers.yaml knows launchers)

@lru_cache(maxsize=256)
def _parsed(command: str) -> tuple[tuple[Launch, ...], str | None]:
    try:
        return tuple(parse_steps(command, launchers())), None
    except CommandSyntaxError as exc:
        return (), str(exc)


def _training(dist: Distribution) -> Launch | None:
    return training_step(list(_parsed(dist.command)[0])) if dist.command else None


def _launches(ctx: Context, kind: str) -> Iterator[tuple[str, Distribution, Launch]]:
    """(name, distribution, training step) of every distribution whose command starts a `kind` launcher."""
    for name, dist in ctx.stack.distributions.items():
        step = _training(dist)
        if step is not None and step.kind == kind:
            yield name, dist, step


def _launched_per_node(dist: Distribution) -> bool:
    """How the processes really start: a command that starts a per-node launcher is per-node whatever
    `launcher:` declares (distribution.launcher-mismatch says that once; the rules judging per-process
    launch stay quiet rather than pile on)."""
    step = _training(dist)
    return dist.launcher == "per-node" or (step is not None and step.kind == "per-node")


def _command_at(ctx: Context, name: str, rule_id: str, message: str, hint: str, severity: str = "error") -> Diagnostic:
    return ctx.at(("distributions", name, "command"), rule_id, message, hint, severity)


def _tasks_per_node(dist: Distribution) -> int:
    return dist.processes_per_instance if dist.type != "tensorflow" else 1


def _per_node_processes(step: Launch, dist: Distribution, gpus: int) -> tuple[int | None, str]:
    """How many processes the per-node launcher starts on each node, and the flag that says so."""
    spec = step.launcher
    value = step.role("processes_per_node")
    if value is not None:
        flag = next(f for f in spec.flags["processes_per_node"] if f in step.options)
        return (gpus if value.strip().lower() in ("gpu", "auto") else count(value)), f"{flag} {value}"
    total = step.role("processes_total")
    if total is not None:
        nodes = count(step.role("nodes")) or dist.instance_count
        flag = spec.flags["processes_total"][0]
        per = count(total)
        return (per // nodes if per is not None and per % nodes == 0 else None), f"{flag} {total} over {nodes} node(s)"
    if spec.processes_default == "all_gpus":
        return gpus, f"{step.invoked_as} (one process per GPU by default)"
    if isinstance(spec.processes_default, int):
        return spec.processes_default, f"{step.invoked_as} without {spec.flags['processes_per_node'][0]} " \
                                       f"(default {spec.processes_default})"
    return None, ""


@rule_for_each("distributions")
def distribution_command_syntax(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    error = _parsed(dist.command)[1] if dist.command else None
    if error:
        yield _command_at(ctx, name, "distribution.command-syntax",
                          f"the command of distribution {name!r} is not valid shell ({error})",
                          "close the quote or escape the character; Azure ML runs the command with bash")


@rule
def distribution_head_node_launcher(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist, step in _launches(ctx, "head-node"):
        nodes, per = dist.instance_count, _tasks_per_node(dist)
        started = nodes * per
        script = step.script or "train.py"
        if step.launcher.kind == "per-node":   # deepspeed --hostfile: it ssh-es into every host itself
            flag = next(f for f in step.launcher.head_node_flags if f in step.options)
            yield _command_at(
                ctx, name, "distribution.head-node-launcher",
                f"{step.invoked_as} {flag} starts the processes of every host itself (over ssh), but Azure ML runs the "
                f"command {started} time(s) ({per} on each of {nodes} node(s)): each copy would start the whole job",
                f"run it once per node: {step.invoked_as} {' '.join(step.launcher.per_node_flags)} --node_rank $NODE_RANK "
                f"--master_addr $MASTER_ADDR --master_port $MASTER_PORT ... with process_count_per_instance: 1 "
                f"({step.launcher.source.split(' ')[0]})")
            continue
        np = count(step.role("processes"))
        result = (f"{started} x {np} = {started * np} processes" if np else
                  f"{started} copies of {step.invoked_as}, each starting its own set of ranks")
        yield _command_at(
            ctx, name, "distribution.head-node-launcher",
            f"the command starts {step.invoked_as}{f' -np {np}' if np else ''}, a head-node launcher, inside an "
            f"Azure ML {dist.type} job that already starts {per} process(es) on each of {nodes} node(s): {result}",
            f"Azure ML builds the launch itself (mpirun for type mpi): drop `{step.invoked_as} ...` and write "
            f"`command: python {script} ...`; set instance_count and process_count_per_instance (one per GPU) instead")


@rule_for_each("distributions")
def distribution_launcher(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    if dist.launcher != "per-node" or dist.processes_per_instance <= 1 or dist.type == "tensorflow":
        return
    step = _training(dist)
    sku = ctx.sku(dist.cluster)
    gpus = sku.gpus if sku else 0
    if step is not None and step.kind == "per-node":
        each, _ = _per_node_processes(step, dist, gpus)
        what = step.invoked_as
    else:
        each, what = (gpus or None), (f"{dist.framework} (a per-node launcher)" if dist.framework else
                                      "the per-node launcher")
    ppi = dist.processes_per_instance
    result = f"{ppi} x {each} = {ppi * each} processes per node" if each else f"{ppi} launchers per node"
    if each and sku and sku.gpus:
        result += f" for {sku.gpus} GPUs"
    message = (f"distribution {name!r} runs {what}, which starts the processes of its node itself; "
               f"process_count_per_instance {ppi} starts it {ppi} times on each node: {result}")
    hint = "remove process_count_per_instance (or set it to 1): the launcher starts one process per GPU"
    if dist.command and step is not None:
        yield _command_at(ctx, name, "distribution.per-node-launcher", message, hint)
    else:
        yield ctx.at(("distributions", name, "process_count_per_instance"), "distribution.per-node-launcher",
                     message, hint)


@rule
def distribution_launcher_declared(ctx: Context) -> Iterator[Diagnostic]:
    # A declared per-node launcher with a plain script is fine: the script may start the node's processes
    # itself (the MPI per-node launch of the guides); a per-node launcher declared per-process is not.
    for name, dist, step in _launches(ctx, "per-node"):
        if ("distributions", name, "launcher") in ctx.loaded.source.keys and dist.launcher != "per-node":
            yield _command_at(ctx, name, "distribution.launcher-mismatch",
                              f"distribution {name!r} declares launcher: {dist.launcher}, but its command starts "
                              f"{step.invoked_as}, a per-node launcher",
                              "remove `launcher:` (infra derives it from the command) or set launcher: per-node")


@rule
def distribution_launcher_gpus(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist, step in _launches(ctx, "per-node"):
        sku = ctx.sku(dist.cluster)
        if sku is None or not sku.gpus or dist.processes_per_instance > 1:
            continue
        per_node, said = _per_node_processes(step, dist, sku.gpus)
        if per_node is None:
            continue
        # the launcher's count is per node (torchrun) or across every node (accelerate's --num_processes)
        flags = step.launcher.flags
        flag, wanted = ((flags["processes_per_node"][0], sku.gpus) if flags.get("processes_per_node")
                        else (flags.get("processes_total", ("",))[0], sku.gpus * dist.instance_count))
        yield from _gpus_used(
            ctx, name, per_node, sku.gpus,
            (f"{said} starts {per_node} processes on each node, but {sku.name} has {sku.gpus} GPU(s)",
             f"pass {flag} {wanted} (one process per GPU)"),
            (f"{said} starts {per_node} process(es) on each node: {per_node} of the {sku.gpus} GPUs of {sku.name}",
             f"pass {flag} {wanted} to use every GPU you pay for"))


def _gpus_used(ctx: Context, name: str, used: int, gpus: int, exceeded: tuple[str, str],
               underused: tuple[str, str]) -> Iterator[Diagnostic]:
    """distribution.gpus-exceeded (an error) or -underused (a warning): `used` of a node's `gpus`; each tuple is
    the message and the hint."""
    if used > gpus:
        yield _command_at(ctx, name, "distribution.gpus-exceeded", *exceeded)
    elif used < gpus:
        yield _command_at(ctx, name, "distribution.gpus-underused", *underused, "warning")


def _nodes_range(value: str) -> tuple[int, int] | None:
    low, sep, high = value.partition(":")
    if count(low) is None or (sep and count(high) is None):
        return None
    return count(low), count(high) if sep else count(low)


@rule
def distribution_launcher_nodes(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist, step in _launches(ctx, "per-node"):
        spec, nodes = step.launcher, dist.instance_count
        value = step.role("nodes")
        flag = spec.flags.get("nodes", ("--nnodes",))[0]
        if value is None:
            if spec.nodes_default is not None and spec.nodes_default != nodes:
                yield _command_at(ctx, name, "distribution.launcher-nodes",
                                  f"{step.invoked_as} without {flag} assumes {spec.nodes_default} node(s), but the job "
                                  f"runs on instance_count {nodes}: each node would train alone",
                                  f"pass {flag} {nodes}")
            continue
        span = _nodes_range(value)
        if span is not None and not span[0] <= nodes <= span[1]:
            waits = span[0] > nodes
            yield _command_at(ctx, name, "distribution.launcher-nodes",
                              f"{step.invoked_as} {flag} {value} but the job runs on instance_count {nodes} node(s): "
                              + ("the rendezvous waits for nodes that never come" if waits else
                                 "the surplus nodes cannot join the job"),
                              f"pass {flag} {nodes} (or change instance_count)")


@rule
def distribution_launcher_rendezvous(ctx: Context) -> Iterator[Diagnostic]:
    own = launcher_variables()
    known = {v for sets in own.values() for v in sets}
    for name, dist, step in _launches(ctx, "per-node"):
        if dist.instance_count < 2:
            continue
        spec = step.launcher
        values = {r: step.role(r) for r in ("node_rank", "master_addr", "master_port", "rendezvous")}
        suggested = {"pytorch": ("$NODE_RANK", "$MASTER_ADDR", "$MASTER_PORT")}.get(dist.type)
        missing = [r for r in ("node_rank", "master_addr", "master_port") if values[r] is None and spec.flags.get(r)]
        if values["rendezvous"] is None and missing:
            flags = [spec.flags[r][0] for r in ("node_rank", "master_addr", "master_port") if spec.flags.get(r)]
            fix = " ".join(f"{f} {v}" for f, v in zip(flags, suggested)) if suggested else \
                f"{spec.flags.get('rendezvous', flags)[0]} $AZ_BATCH_MASTER_NODE with $OMPI_COMM_WORLD_RANK as the node rank"
            yield _command_at(ctx, name, "distribution.launcher-rendezvous",
                              f"{step.invoked_as} on {dist.instance_count} nodes without "
                              f"{', '.join(spec.flags[r][0] for r in missing)}: every node starts its own rendezvous "
                              "and waits for the others forever",
                              f"pass {fix} (Azure ML sets these on each node of a {dist.type} job)")
        literal = count(values["node_rank"])
        if literal is not None:
            yield _command_at(ctx, name, "distribution.launcher-rendezvous",
                              f"{step.invoked_as} {spec.flags['node_rank'][0]} {literal} gives every one of the "
                              f"{dist.instance_count} nodes the same rank",
                              f"pass {spec.flags['node_rank'][0]} "
                              f"${node_rank_variables()[0].get(dist.type, 'NODE_RANK')}")
        for flag in spec.multi_node_requires:
            if flag not in step.options:
                yield _command_at(ctx, name, "distribution.launcher-rendezvous",
                                  f"{step.invoked_as} on {dist.instance_count} nodes needs {flag} to run once per node "
                                  f"(without it, it starts the other nodes itself over ssh)",
                                  f"add {flag} with --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port "
                                  "$MASTER_PORT, or launch with torchrun")
        unset = sorted({v for value in values.values() for v in variables(value)}
                       & known - set(own.get(dist.type, {})) - set(dist.environment_variables))
        for var in unset:
            yield _command_at(ctx, name, "distribution.launcher-rendezvous",
                              f"the command passes ${var}, which Azure ML does not set in a {dist.type} job",
                              f"use the variables of type {dist.type}: {', '.join(sorted(own.get(dist.type, {})))}")


@rule_for_each("distributions")
def distribution_node_rank_variable(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """A per-node launch whose node rank is a variable that only reads like one (frameworks.yaml
    not_node_rank: OMPI_COMM_WORLD_NODE_RANK is 0 on every node): every node claims rank 0, the job hangs."""
    step = _training(dist)
    if step is None or dist.instance_count < 2:
        return
    if step.kind == "per-node":
        flag = next((f for f in step.launcher.flags.get("node_rank", ()) if f in step.options), None)
        value = step.role("node_rank")
    else:   # a script that starts its node's processes itself: its own --node_rank / --node-rank argument
        names = [f for spec in launchers().launchers for f in spec.flags.get("node_rank", ())]
        value = step.script_option(names)
        flag = next((n for n in names for a in step.script_args if a == n or a.startswith(n + "=")), None)
    ranks, wrong = node_rank_variables()
    for var in sorted(variables(value) & wrong):
        right = ranks.get(dist.type, "NODE_RANK")
        one = " with process_count_per_instance: 1 (one process per node, so a process's rank is its node's)" \
            if dist.type == "mpi" else ""
        yield _command_at(ctx, name, "distribution.node-rank-variable",
                          f"{flag} ${var}: despite its name, {var} is not the node's rank (it numbers the processes "
                          f"within one node): it is 0 on every one of the {dist.instance_count} nodes, so each claims "
                          "rank 0 and the rendezvous waits forever",
                          f"pass {flag} ${right}{one} (validators/frameworks.yaml node_rank; "
                          "https://azure.github.io/azureml-cheatsheets/docs/cheatsheets/python/v1/distributed-training)")


def _script_text(ctx: Context, dist: Distribution, script: str | None) -> str | None:
    """The start of the training script the command runs, when it lies inside `code:` (never outside it)."""
    if not (dist.code and script and script.endswith(".py")):
        return None
    code = ctx.loaded.base_dir / dist.code
    return _project_text(code / script, code) if inside(code, project_root(ctx.loaded.path)) else None


_TRAINER_KEYWORD = r"\b{}\s*=\s*(-?\d+|['\"]auto['\"])"


@rule_for_each("distributions", framework=True)
def distribution_lightning(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    step = _training(dist)
    sku = ctx.sku(dist.cluster)
    if fw is None or not fw.nodes_flags or step is None or step.kind != "script":
        return
    found: dict[str, tuple[str, str]] = {}   # nodes/devices -> (value, where it was read)
    for key, flags in (("nodes", fw.nodes_flags), ("devices", fw.devices_flags)):
        for s in _parsed(dist.command)[0]:
            value = s.script_option(flags)
            if value:
                found[key] = (value, next(f for f in flags if s.script_option([f]) is not None))
                break
    text = _script_text(ctx, dist, step.script) if len(found) < 2 else None
    if text is not None:
        for key, keyword in (fw.trainer_keywords or {}).items():
            m = None if key in found else re.search(_TRAINER_KEYWORD.format(re.escape(keyword)), text)
            if m:
                line = text.count("\n", 0, m.start()) + 1
                found[key] = (m.group(1).strip("'\""), f"{keyword}= in {dist.code}/{step.script}:{line}")
    if "nodes" in found:
        value, where = found["nodes"]
        if count(value) is not None and count(value) != dist.instance_count:
            yield _command_at(ctx, name, "distribution.lightning-trainer",
                              f"Lightning's {where} {value} but the job runs on instance_count {dist.instance_count} "
                              "node(s): the trainer waits for a world size that never forms",
                              f"set it to {dist.instance_count} (or change instance_count)")
    if "devices" in found and sku is not None and sku.gpus:
        value, where = found["devices"]
        devices = sku.gpus if value in ("-1", "auto") else count(value)
        if devices is None:
            return
        if dist.launcher == "per-process" and dist.processes_per_instance > 1:
            if devices != dist.processes_per_instance:
                yield _command_at(ctx, name, "distribution.lightning-trainer",
                                  f"Lightning's {where} {value} but Azure ML starts {dist.processes_per_instance} "
                                  "processes per node (process_count_per_instance): the ranks disagree on the "
                                  "world size", f"set it to {dist.processes_per_instance}")
        else:
            yield from _gpus_used(
                ctx, name, devices, sku.gpus,
                (f"Lightning's {where} {value} but {sku.name} has {sku.gpus} GPU(s)", f"set it to {sku.gpus}"),
                (f"Lightning's {where} {value} uses {devices} of the {sku.gpus} GPUs of {sku.name}",
                 f"set it to {sku.gpus} to use every GPU you pay for"))


def _raise_max_instances(ctx: Context, dist: Distribution, nodes: int) -> str:
    """What a hint proposing instance_count `nodes` must add so that distribution.instance-count holds."""
    cluster = ctx.stack.clusters.get(dist.cluster)
    if cluster is None or nodes <= cluster.max_instances:
        return ""
    return f" with clusters.{dist.cluster}.max_instances raised to {nodes} (it is {cluster.max_instances})"


@rule_for_each("distributions")
def distribution_tensorflow(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    base = ("distributions", name)
    if dist.type != "tensorflow":
        for field_name in ("worker_count", "parameter_server_count"):
            if getattr(dist, field_name) is not None:
                yield ctx.at(base + (field_name,), "distribution.tensorflow-counts",
                             f"{field_name} applies only to type tensorflow (this is {dist.type})",
                             f"remove {field_name}, or set type: tensorflow")
        return
    if dist.process_count_per_instance is not None:
        # Azure ML's TensorFlow distribution has only worker_count and parameter_server_count.
        yield ctx.at(base + ("process_count_per_instance",), "distribution.tensorflow-counts",
                     "process_count_per_instance does not apply to type tensorflow",
                     "remove it and set worker_count (one worker per node uses all its GPUs)")
    nodes = dist.instance_count
    workers = dist.worker_count or nodes
    ps = dist.parameter_server_count or 0
    at = base + ("worker_count",)
    # Azure ML places the worker_count + parameter_server_count tasks on instance_count nodes: parameter
    # servers may share a node with a worker (2 workers + 1 ps on 2 nodes, as the guides show), two workers
    # may not (each worker's strategy claims every GPU of its node).
    if workers > nodes:
        yield ctx.at(at, "distribution.tensorflow-counts",
                     f"{workers} workers on instance_count {nodes} node(s): Azure ML would put two workers on a "
                     "node, and each worker's strategy claims every GPU of its node",
                     f"set worker_count: {nodes} (one worker per node) or instance_count: {workers}"
                     + _raise_max_instances(ctx, dist, workers))
    elif workers + ps < nodes:
        yield ctx.warning(at, "distribution.tensorflow-idle-nodes",
                     f"{workers} worker(s){f' + {ps} parameter server(s)' if ps else ''} on instance_count {nodes} "
                     f"nodes: {nodes - workers - ps} node(s) run no task and are paid for idle",
                     f"set worker_count: {nodes - ps} (MultiWorkerMirroredStrategy: one worker per node) or "
                     f"instance_count: {workers + ps}" + _raise_max_instances(ctx, dist, workers + ps))
    if ps and ps >= workers:
        yield ctx.warning(base + ("parameter_server_count",), "distribution.tensorflow-counts",
                     f"{ps} parameter server(s) for {workers} worker(s) is unusual and wastes nodes",
                     "use fewer parameter servers than workers (or none with MultiWorkerMirroredStrategy)")


@rule_for_each("distributions", framework=True)
def distribution_transformers_local_rank(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    needle = fw.per_process_command_must_contain if fw else None
    if not (needle and dist.command) or _launched_per_node(dist):
        return
    steps, error = _parsed(dist.command)
    # HF's argument parser accepts --local_rank and --local-rank alike
    spellings = (needle, needle.replace("_", "-"))
    if error is None and not any(s.script_option(spellings) is not None for s in steps):
        yield _command_at(ctx, name, "distribution.transformers-local-rank",
                          f"{fw.name} under per-process launch needs {needle} in its command: Azure ML sets only "
                          "the LOCAL_RANK variable",
                          f"append `{needle} $LOCAL_RANK` to the command")


@rule_for_each("distributions")
def distribution_ib_disabled(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    sku = ctx.sku(dist.cluster)
    env = dist.environment_variables
    ib_off = env.get("NCCL_IB_DISABLE") == "1" or env.get("NCCL_NET", "").lower() == "socket"
    if ib_off and sku and sku.infiniband_eligible and dist.instance_count > 1:
        yield ctx.warning(("distributions", name, "environment_variables"), "distribution.infiniband-disabled",
                     f"distribution {name!r} disables NCCL's InfiniBand on {sku.name}, which you pay for",
                     "remove NCCL_IB_DISABLE / NCCL_NET=Socket (keep them only as a deliberate negative control)")


@rule_for_each("distributions")
def distribution_launcher_variables(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    set_by_type = launcher_variables()
    sets = set_by_type.get(dist.type, {})
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
