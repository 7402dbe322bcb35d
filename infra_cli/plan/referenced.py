"""What a stack's jobs run on that infra does not manage, read live by plan and never created or deleted by apply:
a compute named by `compute: azureml:NAME` (a Kubernetes (Arc) compute, an AmlCompute made elsewhere: data read
from the workspace, not a kind of plan/kinds/), and Azure ML's serverless compute, whose size must be offered in
the workspace's region and whose nodes draw on the same Azure ML quota as a cluster's
(https://learn.microsoft.com/azure/machine-learning/how-to-use-serverless-compute)."""

from __future__ import annotations

import datetime
from typing import Any, Callable

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, says
from infra_cli.knowledge.skus import Catalog
from infra_cli.plan.cost import UNKNOWN, money, node_cost
from infra_cli.plan.live import LiveFacts
from infra_cli.stack.load import LoadedStack
from infra_cli.validate.rules.registry import RULES, Context

# The rule modules whose checks read a distribution's size (Context.size_of)
_SIZE_RULE_MODULES = ("infra_cli.validate.rules.distributions", "infra_cli.validate.rules.launch")

# azure-ai-ml's compute types as compute_values names them (azure/compute_codec.py), as `az ml compute` says them
_KIND_WORDS = {"amlcompute": "an AmlCompute cluster", "kubernetes": "a Kubernetes compute",
               "computeinstance": "a compute instance", "virtualmachine": "a virtual machine"}
SERVERLESS_SOURCE = "https://learn.microsoft.com/azure/machine-learning/how-to-use-serverless-compute"


def referenced_computes(loaded: LoadedStack, read_compute: Callable[[str], dict[str, Any] | None],
                        catalog: Catalog) -> list[Diagnostic]:
    """Each compute a distribution names but the stack does not declare, read live: missing, an error naming how
    to create or attach it (apply never does); present, what Azure says it is (its kind, its size where it has
    one), and a GPU count against the processes per node where the catalog knows the size."""
    stack, out, sizes = loaded.stack, [], {}
    names = sorted({d.compute_name for d in stack.distributions.values()
                    if d.compute_name is not None and not d.virtual_cluster})
    read = {name: read_compute(name) for name in names}
    where = f"workspace {stack.workspace.name!r}"
    for dist_name, dist in stack.distributions.items():
        name = dist.compute_name
        if name is None:
            continue
        at = ("distributions", dist_name, "compute")
        if dist.virtual_cluster:   # an ARM resource of its own, not one of the workspace's computes
            out.append(loaded.source.diagnostic(
                at, "plan.compute-unread",
                f"distribution {dist_name!r} runs on virtual cluster {name!r}, which infra does not read (it reads "
                "the workspace's computes); Azure ML checks it when the job is submitted",
                "nothing to do; infra neither creates nor deletes it", "info"))
            continue
        values = read[name]
        if values is None:
            out.append(loaded.source.diagnostic(
                at, "plan.compute-missing",
                f"distribution {dist_name!r} runs on compute {name!r}, which does not exist in {where}; infra does "
                "not manage it, so apply will not create it",
                f"attach it (az ml compute attach --type Kubernetes --name {name} ...) or create it (az ml compute "
                f"create --type AmlCompute --name {name} ...), or declare a cluster under `clusters:` and name it "
                "with `cluster:`"))
            continue
        kind = str(values.get("compute_type") or "unknown")
        size = values.get("size") if isinstance(values.get("size"), str) else None
        out.append(loaded.source.diagnostic(
            at, "plan.compute-read",
            f"distribution {dist_name!r} runs on compute {name!r}: {_KIND_WORDS.get(kind.lower(), kind)}"
            + (f" of {size}" if size else "") + ", read live; infra does not manage it (apply never creates, "
            "changes or deletes it)", "nothing to do", "info"))
        if size:
            sizes[name] = size
    return out + live_size_rules(loaded, sizes, catalog)


def live_size_rules(loaded: LoadedStack, sizes: dict[str, str], catalog: Catalog) -> list[Diagnostic]:
    """validate's size rules (InfiniBand between nodes, GPUs against processes, launchers, Ray's --num-gpus) on
    the distributions whose compute plan read a size of (`sizes`: compute name -> size): what they say with the
    size known that they did not say without it."""
    if not sizes:
        return []
    checks = [fn for fn in RULES if fn.__module__ in _SIZE_RULE_MODULES]
    key = lambda d: (d.rule, d.line, d.column, d.message)  # noqa: E731
    offline = {key(d) for fn in checks for d in fn(Context(loaded, catalog))}
    return [d for fn in checks for d in fn(Context(loaded, catalog, live_sizes=sizes)) if key(d) not in offline]


def serverless_preflight(loaded: LoadedStack, facts: LiveFacts, catalog: Catalog) -> list[Diagnostic]:
    """A serverless job's instance_type against the workspace region's sizes (offered, not restricted) and its
    nodes' vCPUs against Azure ML's quota for the size's family and the job's tier (spot: low priority), the
    quota serverless jobs share with clusters."""
    stack, out = loaded.stack, []
    for name, dist in stack.distributions.items():
        size = dist.instance_type if dist.runs_on == "serverless" else None
        if size is None:
            continue
        at = ("distributions", name, "resources", "instance_type")
        where = facts.location
        known = catalog.get(size)
        if known is not None and known.retired_as_of(datetime.date.today()):
            # validate's cluster.size-retired, which plan judges live for clusters: a serverless job has no node yet
            out.append(loaded.source.diagnostic(
                at, "cluster.size-retired", f"{known.name} is retired by Azure: serverless compute creates no node "
                "of it", says("choose a current size for resources.instance_type (", NextStep(("infra", "skus")), ")")))
            continue
        live = facts.skus.get(size.lower())
        if "skus" not in facts.unread:
            if live is None:
                out.append(loaded.source.diagnostic(
                    at, "preflight.size-unavailable", f"smoke.{name}: serverless size {size} is not offered in {where}",
                    "pick a size the region offers (infra skus --location REGION)"))
                continue
            if live.restrictions:
                out.append(loaded.source.diagnostic(
                    at, "preflight.size-restricted",
                    f"smoke.{name}: serverless size {size} is restricted in {where} for this subscription "
                    f"({', '.join(live.restrictions)})", "request access through an Azure support ticket, or use "
                    "another size"))
                continue
        sku = live if live is not None else catalog.get(size)
        if sku is None:
            continue
        tier = "low_priority" if dist.queue_settings is not None and dist.queue_settings.job_tier == "spot" \
            else "dedicated"
        needed = sku.vcpus * dist.instance_count
        for pool in facts.quota.pools(sku.family, tier, stack.workspace.name):
            available = pool.limit - pool.current
            if needed > available:
                out.append(loaded.source.diagnostic(
                    ("distributions", name, "instance_count"), "preflight.quota",
                    f"not enough Azure ML quota for serverless {size} in {where}: {dist.instance_count} node(s) need "
                    f"{needed} vCPUs of '{pool.name}', {max(available, 0)} are available ({pool.current} used of "
                    f"{pool.limit}); serverless jobs draw on the quota clusters do",
                    "request an Azure ML quota increase for this region (https://learn.microsoft.com/azure/"
                    "machine-learning/how-to-manage-quotas), or lower instance_count"))
                break
    return out


def serverless_costs(loaded: LoadedStack, catalog: Catalog) -> list[Diagnostic]:
    """What each serverless job costs while it runs, as a cluster's `# cost:` line says it: the list price of a
    node-hour of its instance_type in the workspace's region and its tier (spot: low priority), times its nodes
    (validators/skus.yaml `prices:`; a size or region without one is "price unknown", never a guess). Serverless
    compute bills as AmlCompute does (the Learn page above), for the job's nodes only while it runs."""
    stack, out = loaded.stack, []
    for name, dist in stack.distributions.items():
        size = dist.instance_type if dist.runs_on == "serverless" else None
        if size is None:
            continue
        tier = "low_priority" if dist.queue_settings is not None and dist.queue_settings.job_tier == "spot" \
            else "dedicated"
        cost = node_cost({"size": size, "tier": tier, "location": stack.workspace.location,
                          "max_instances": dist.instance_count}, catalog)
        where = f"{size} {tier} in {stack.workspace.location}"
        said = f"{UNKNOWN} ({where})" if cost is None or cost.per_node_hour is None else (
            f"{money(cost.per_node_hour, catalog.currency)} per node-hour ({where}, list price {cost.as_of}); "
            f"{money(cost.at_max_instances_hour or 0.0, catalog.currency)}/hour for its {dist.instance_count} "
            "node(s), only while the job runs")
        out.append(loaded.source.diagnostic(
            ("distributions", name, "resources", "instance_type"), "plan.serverless-cost",
            f"distribution {name!r} runs on serverless compute: {said}",
            f"serverless compute bills as AmlCompute does ({SERVERLESS_SOURCE})", "info"))
    return out
