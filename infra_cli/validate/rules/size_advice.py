"""The sizes a rule suggests: why a size has no usable InfiniBand, and the current InfiniBand sizes with the GPUs
the cluster's distributions need, closest to the cluster's size first (validators/skus.yaml)."""

from __future__ import annotations

from infra_cli.knowledge.size_name import SizeName, parse_size_name
from infra_cli.knowledge.skus import Sku
from infra_cli.stack.model import Cluster, Distribution
from infra_cli.validate.rules.command import launched_per_node
from infra_cli.validate.rules.registry import Context


def judged_by_name(ctx: Context, size: str) -> SizeName | None:
    """A size the catalog lacks, read by Azure's naming convention; None for a catalogued size and for a catalogued
    one misspelt (`Standard_DN96asr_v4`): cluster.size-unknown's did-you-mean is all there is to say of a typo, and
    judging its letters as a size ("an RDMA size by its name") would contradict it."""
    if ctx.catalog.get(size) is not None or ctx.catalog.written_alike(size) is not None:
        return None
    return parse_size_name(size)


def ib_reason(sku: Sku) -> str:
    if sku.rdma and not sku.sriov:
        return f"{sku.name} has RDMA but no SR-IOV, so NCCL and MPI inside Azure ML cannot use its InfiniBand"
    return f"{sku.name} has no InfiniBand" + (f" ({sku.note.rstrip('.')})" if sku.note else "")


def _gpu_model(sku: Sku | None) -> str | None:
    """The GPU's model without its memory or board ("V100 16GB" -> "V100"): what makes two sizes the same class."""
    return sku.gpu_model.split()[0].upper() if sku is not None and sku.gpu_model else None


def closest_first(ctx: Context, current: Sku | None, pool, cluster: Cluster | None = None) -> list[Sku]:
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


def ib_sizes(ctx: Context, cluster_name: str) -> str:
    # current sizes only (a retiring size is no advice), with the GPUs the processes per node need (a
    # suggestion that distribution.gpus-exceeded refuses next is no advice either), closest to the cluster's first
    cluster = ctx.stack.clusters.get(cluster_name)
    return _ib_sizes(ctx, cluster.size if cluster is not None else None, _gpus_needed(ctx, cluster_name), cluster)


def ib_sizes_for(ctx: Context, dist: Distribution) -> str:
    """ib_sizes for the size the distribution runs on: its cluster's, or a serverless job's instance_type (the
    GPUs its own processes need)."""
    if dist.cluster is not None:
        return ib_sizes(ctx, dist.cluster)
    return _ib_sizes(ctx, ctx.size_of(dist), _gpus_of(dist), None)


def _ib_sizes(ctx: Context, size: str | None, gpus: int, cluster: Cluster | None) -> str:
    current = ctx.catalog.get(size) if size is not None else None
    # a CPU size is pointed at the HPC sizes (HB, HC, HX) with all their cores, not the constrained-core ones
    parsed = parse_size_name(size) if current is None and size is not None else None
    cpu = current.gpus == 0 if current is not None else parsed is not None and not parsed.family.startswith("N")

    def fits(s: Sku) -> bool:
        if cpu:
            return s.gpus == 0 and getattr(parse_size_name(s.name), "active_vcpus", 0) is None
        return s.nccl_over_ib and s.gpus >= gpus
    pool = [s for s in ctx.catalog if s.infiniband_eligible and s.retirement_date is None and fits(s)]
    return ", ".join(s.name for s in closest_first(ctx, current, pool, cluster))


def _gpus_of(dist: Distribution) -> int:
    """The processes per node a distribution starts one per GPU (per-node launches size themselves to the node)."""
    return 0 if dist.type == "tensorflow" or launched_per_node(dist) else dist.processes_per_instance


def _gpus_needed(ctx: Context, cluster_name: str) -> int:
    """The most processes per node a distribution on the cluster starts one per GPU: a size suggested for the
    cluster needs that many GPUs."""
    return max((_gpus_of(d) for d in ctx.stack.distributions.values() if d.cluster == cluster_name), default=0)
