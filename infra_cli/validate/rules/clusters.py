"""Rules on each cluster: its size (known, current, not retired), InfiniBand, SSH (its admin password not
written inline), location, network (public IP, subnet) and a pasted compute YAML's name."""

from __future__ import annotations

import datetime
import difflib
from typing import Iterator

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, says
from infra_cli.knowledge.size_name import parse_size_name
from infra_cli.knowledge.skus import Catalog, Sku
from infra_cli.stack.model import Cluster, Distribution
from infra_cli.stack.variables import ENV_PREFIX
from infra_cli.validate.rules.registry import Context, declare, rule_for_each
from infra_cli.validate.rules.resources import pasted_name
from infra_cli.validate.rules.size_advice import closest_first, ib_reason, ib_sizes, judged_by_name


def same_family(size: str, catalog: Catalog) -> list[str]:
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
    family = [s for s in map(ctx.catalog.get, same_family(retired.name, ctx.catalog)) if s and keeps(s)]
    pool = family or [s for s in ctx.catalog if keeps(s) and s.gpus > 0 and s.accelerator == retired.accelerator]
    picks = closest_first(ctx, retired, pool, cluster)[:3]
    return f", e.g. {', '.join(s.name for s in picks)}" if picks else says(" (", NextStep(("infra", "skus")), ")")


def _retirement(sku: Sku) -> str:
    day = sku.retirement_date
    when = "" if day is None or day == datetime.date.min else f" on {day.isoformat()}"
    return when + (f" ({sku.retirement_source})" if sku.retirement_source else "")


def _size_unknown(ctx: Context, path: tuple, size: str, subject: str) -> Iterator[Diagnostic]:
    """A size the catalog does not have: an error for a name that is no Azure VM size, a warning for a GPU or HPC
    size (the catalog sets out to cover those families: a gap worth saying); `subject` names it ("size 'X'")."""
    alike = ctx.catalog.written_alike(size)
    if alike is not None:   # `ND96asr_v4`, `Standard_ND96asrv4`, `Standard_DN96asr_v4`: a catalogued size misspelt
        yield ctx.at(path, SIZE_UNKNOWN.id, f"{subject} is not an Azure VM size: did you mean {alike!r}?",
                     f"write {alike!r} (Azure's spelling: the `Standard_` prefix, `_` before the version); "
                     + says(NextStep(("infra", "skus")), " lists the catalogued sizes"))
        return
    parsed = parse_size_name(size)
    family = {n.lower(): n for n in same_family(size, ctx.catalog)}  # Azure reads names in any case
    close = [family[c] for c in difflib.get_close_matches(size.lower(), list(family), n=1, cutoff=0.75)]
    mean = f"did you mean {close[0]!r}? " if close else ""
    if parsed is None:
        yield ctx.at(path, SIZE_UNKNOWN.id,
                     f"{subject} is not an Azure VM size name (Standard_<family><vCPUs><features>"
                     "[_<accelerator>][_v<version>])",
                     says(mean, "see ", NextStep(("infra", "skus")), " or https://learn.microsoft.com/azure/virtual-machines/sizes/overview"))
    elif parsed.gpu_or_hpc:
        rdma = "an RDMA size (`r`), SR-IOV unconfirmed" if parsed.rdma else "no RDMA (no `r` in its name)"
        yield ctx.warning(path, SIZE_UNKNOWN.id,
                          f"{subject} is not in the SKU catalog; judged by its name: {parsed.family} family, "
                          f"{rdma}", mean + "add the size to validators/skus.yaml (with its source) so its GPUs and "
                          "InfiniBand can be checked")


SIZE_UNKNOWN = declare(
    "cluster.size-unknown", "error",
    "a cluster's size is not an Azure VM size name (a warning: a GPU or HPC size the catalog lacks)",
    also="warning")
SIZE_RETIRED = declare("cluster.size-retired", "error",
                       "a cluster's size is retired by Azure: no new cluster of it can be created (a warning in plan "
                       "for one that exists)", also="warning")
SIZE_RETIRING = declare("cluster.size-retiring", "warning", "a cluster's size has a retirement date announced by Azure")


@rule_for_each("clusters", SIZE_UNKNOWN, SIZE_RETIRED, SIZE_RETIRING)
def cluster_size(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    path = ("clusters", name, "size")
    sku = ctx.catalog.get(cluster.size)
    if sku is None:
        yield from _size_unknown(ctx, path, cluster.size, f"size {cluster.size!r}")
    elif sku.retired_as_of(ctx.today):
        # Azure creates no new VM of a retired size; a cluster that exists keeps its nodes until Azure
        # deallocates them. Offline nothing says it exists: `infra plan` downgrades this for a live cluster.
        yield ctx.at(path, SIZE_RETIRED.id,
                     f"{sku.name} was retired by Azure{_retirement(sku)}: a new cluster of this size cannot be created",
                     says("choose a current size", _successors(sku, ctx, cluster), " (", NextStep(("infra", "plan")),
                          " reports a cluster that already exists as a warning)"))
    elif sku.retiring_as_of(ctx.today):
        yield ctx.warning(path, SIZE_RETIRING.id,
                     f"Azure retires {sku.name}{_retirement(sku)}; the cluster stops working then",
                     says("plan the move to a current size (", NextStep(("infra", "skus")), ")"))


INFINIBAND_INELIGIBLE = declare(
    "cluster.infiniband-ineligible", "error",
    "a cluster with `infiniband: required` has a size without InfiniBand that NCCL and MPI can use")
INFINIBAND_UNVERIFIED = declare(
    "cluster.infiniband-unverified", "warning",
    "a cluster requires InfiniBand on an RDMA size the catalog does not know (SR-IOV unconfirmed)")


@rule_for_each("clusters", INFINIBAND_INELIGIBLE, INFINIBAND_UNVERIFIED)
def cluster_infiniband(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    if cluster.infiniband != "required":
        return
    path = ("clusters", name, "size")
    sku = ctx.catalog.get(cluster.size)
    parsed = judged_by_name(ctx, cluster.size) if sku is None else None
    if sku is not None and not sku.infiniband_eligible:
        yield ctx.at(path, INFINIBAND_INELIGIBLE.id,
                     f"cluster {name!r} requires InfiniBand but {ib_reason(sku)}",
                     f"use an SR-IOV InfiniBand size ({ib_sizes(ctx, name)}) or set "
                     "`infiniband: optional`")
    elif parsed is not None and not parsed.rdma:
        yield ctx.at(path, INFINIBAND_INELIGIBLE.id,
                     f"cluster {name!r} requires InfiniBand but {cluster.size} has no `r` (RDMA) in its name",
                     f"use an SR-IOV InfiniBand size ({ib_sizes(ctx, name)}) or set "
                     "`infiniband: optional`")
    elif parsed is not None:
        yield ctx.warning(path, INFINIBAND_UNVERIFIED.id,
                     f"cluster {name!r} requires InfiniBand; {cluster.size} is an RDMA size by its name, but "
                     "whether NCCL and MPI can use it (SR-IOV) is unconfirmed: NC24r-class sizes cannot",
                     says("add the size to validators/skus.yaml with its sriov fact, or prove it with ",
                          NextStep(("infra", "smoke"))))


SSH_SETTINGS = declare("cluster.ssh-settings", "warning",
                       "a cluster opens the nodes' SSH port without an admin user and key")


@rule_for_each("clusters", SSH_SETTINGS)
def cluster_ssh(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    ssh = cluster.ssh_settings
    if cluster.ssh_public_access_enabled and not (ssh and ssh.admin_username and (ssh.ssh_key_value or ssh.admin_password)):
        # Azure ML accepts it (azure-ai-ml sends it; Azure's recorded GETs show clusters so): the port opens, and
        # with no admin user and credential nobody can log in through it
        yield ctx.warning(("clusters", name, "ssh_public_access_enabled"), SSH_SETTINGS.id,
                     f"cluster {name!r} opens the nodes' SSH port without an admin user and key: Azure ML creates it, "
                     "and nobody can log in",
                     "add ssh_settings: {admin_username: ..., ssh_key_value: ${SSH_PUBLIC_KEY}}, or remove "
                     "ssh_public_access_enabled")


SSH_PASSWORD_INLINE = declare("cluster.ssh-password-inline", "warning",
                              "a cluster's SSH admin password is written in the stack file, not a sensitive variable")


@rule_for_each("clusters", SSH_PASSWORD_INLINE)
def cluster_ssh_secret_inline(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    if cluster.ssh_settings is None or cluster.ssh_settings.admin_password is None:
        return
    path = ("clusters", name, "ssh_settings", "admin_password")
    source = ctx.loaded.source
    if path in source.interpolated:   # a sensitive variable (or ${NAME}): never in the file, never shown
        return
    variable, origin = source.given.get(path, (None, None))
    if variable is None:
        variable, declare_it = "admin_password", ("declare a sensitive variable under `variables:` "
                                                  "(`admin_password: {type: string, sensitive: true}`), write "
                                                  "`admin_password: ${var.admin_password}` here")
        said = "has its SSH admin password written in the stack file, where anyone who reads the file (or its " \
               "git history) has it"
    else:   # ${var.X} of a variable not declared sensitive
        declare_it = f"declare `{variable}` with `sensitive: true` and no default in the file"
        said = (f"takes its SSH admin password from variable {variable!r}, which is not declared sensitive"
                + (": its default writes the password in the stack file" if origin == "default" else ""))
    yield ctx.warning(path, SSH_PASSWORD_INLINE.id, f"cluster {name!r} {said}",
                      f"{declare_it}, and give its value with `--var {variable}=...`, `{ENV_PREFIX}{variable}` or a "
                      "var file kept out of git; or use ssh_key_value (an SSH public key) instead of a password")


LOCATION = declare("cluster.location", "warning", "a cluster is in another region than its workspace")


@rule_for_each("clusters", LOCATION)
def cluster_location(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    ws = ctx.stack.workspace.location
    if cluster.location and cluster.location.replace(" ", "").lower() != ws:
        yield ctx.warning(("clusters", name, "location"), LOCATION.id,
                     f"cluster {name!r} is in {cluster.location} but the workspace is in {ws}",
                     "remove `location` (clusters default to the workspace's region) unless cross-region compute is intended")


PUBLIC_IP_WITHOUT_SUBNET = declare(
    "cluster.public-ip-without-subnet", "warning",
    "a cluster turns node public IPs off without a subnet (an error in plan where the workspace has no managed network)",
    also="error")


@rule_for_each("clusters", PUBLIC_IP_WITHOUT_SUBNET)
def cluster_node_public_ip(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    if not cluster.enable_node_public_ip and not (cluster.network_settings and cluster.network_settings.subnet):
        # Azure ML decides by the workspace: with a managed virtual network (isolation mode AllowInternetOutbound
        # or AllowOnlyApprovedOutbound) the nodes live in it and need no subnet (Microsoft's how-to creates such a
        # cluster with `--set enable_node_public_ip=False`); without one it refuses. Offline the workspace is not
        # known: a warning here, and `infra plan` reads the workspace's isolation mode (an error where it has none).
        yield ctx.warning(("clusters", name, "enable_node_public_ip"), PUBLIC_IP_WITHOUT_SUBNET.id,
                     says(f"cluster {name!r} turns node public IPs off without a subnet: Azure ML creates it only in "
                          "a workspace with a managed virtual network (", NextStep(("infra", "plan")),
                          " reads the workspace's)"),
                     "in a workspace without a managed network add network_settings: {subnet: ...} (see "
                     "https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet); with one, "
                     "nothing to do (https://learn.microsoft.com/azure/machine-learning/how-to-managed-network-compute)")


SUBNET_WITHOUT_VNET = declare("cluster.subnet-without-vnet", "error",
                              "a cluster names a subnet without its virtual network")


@rule_for_each("clusters", SUBNET_WITHOUT_VNET)
def cluster_subnet_needs_vnet(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    net = cluster.network_settings
    if net and net.subnet and not net.vnet_name and not net.subnet.startswith("/"):
        # A subnet name means nothing without its virtual network: the SDK would send
        # .../virtualNetworks/None/subnets/NAME, and Azure answers a full ARM id either way.
        yield ctx.at(("clusters", name, "network_settings", "subnet"), SUBNET_WITHOUT_VNET.id,
                     f"cluster {name!r} names subnet {net.subnet!r} without its virtual network",
                     "add network_settings.vnet_name, or give the subnet's full ARM id (/subscriptions/.../"
                     "virtualNetworks/VNET/subnets/NAME), see https://learn.microsoft.com/azure/machine-learning/"
                     "reference-yaml-compute-aml")


NAME_MISMATCH = declare("cluster.name-mismatch", "error",
                        "a pasted compute YAML's `name:` differs from its key under clusters:")


@rule_for_each("clusters", NAME_MISMATCH)
def cluster_compute_name(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    yield from pasted_name(ctx, "clusters", name, cluster.name, "compute", NAME_MISMATCH.id)


LOW_PRIORITY_UNSUPPORTED = declare("cluster.low-priority-unsupported", "error",
                                   "a cluster asks for `tier: low_priority` on a size Azure ML runs only as dedicated")


@rule_for_each("clusters", LOW_PRIORITY_UNSUPPORTED)
def cluster_low_priority(ctx: Context, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    """Azure ML answers UnsupportedVMSizeForLowPriority for a low-priority cluster of a size skus.yaml marks
    `low_priority: false`: the cluster is created, with the error in its errors, and no job of it ever runs."""
    sku = ctx.catalog.get(cluster.size)
    if cluster.tier != "low_priority" or sku is None or sku.low_priority:
        return
    yield ctx.at(("clusters", name, "tier"), LOW_PRIORITY_UNSUPPORTED.id,
                 f"cluster {name!r}: Azure ML refuses tier low_priority on {sku.name} (UnsupportedVMSizeForLowPriority: "
                 "the cluster is created with the error and none of its jobs runs)",
                 f"set `tier: dedicated` (Azure ML runs {sku.name} only as dedicated), or pick a size it runs at low "
                 f"priority; source: {sku.low_priority_source}")


@rule_for_each("distributions", SIZE_UNKNOWN, SIZE_RETIRED)
def serverless_size(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """A serverless job's resources.instance_type is the size Azure ML creates its nodes of: judged as a cluster's
    size is (a name that is no VM size, a retired size: Azure refuses the job)."""
    if dist.runs_on != "serverless" or dist.instance_type is None:
        return
    path, size = ("distributions", name, "resources", "instance_type"), dist.instance_type
    sku = ctx.catalog.get(size)
    if sku is None:
        yield from _size_unknown(ctx, path, size, f"instance_type {size!r} of serverless distribution {name!r}")
    elif sku.retired_as_of(ctx.today):
        yield ctx.at(path, SIZE_RETIRED.id,
                     f"{sku.name} was retired by Azure{_retirement(sku)}: serverless compute creates no node of it",
                     says("choose a current size for resources.instance_type (", NextStep(("infra", "skus")), ")"))
