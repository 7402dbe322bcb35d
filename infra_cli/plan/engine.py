"""plan: stack file -> Plan. load -> validate -> desired -> refresh (+ live facts) -> diff -> preflight."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable

from infra_cli.arguments import NextStep
from infra_cli.knowledge.skus import load_catalog
from infra_cli.diagnostics import Diagnostic, DiagnosticError, LIST_ENVIRONMENTS, LIST_INSTEAD, says
from infra_cli.plan.configuration import configuration
from infra_cli.plan.desired import desired_resources, distribution_dependencies
from infra_cli.plan.dockerfile_builds import template_build_diagnostics
from infra_cli.plan.diff import diff, drift, force_replace, select_targets
from infra_cli.plan.image_requirements import image_requirement_diagnostics
from infra_cli.azure.protocol import Provider, read_pool
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.live import DEFAULT_READS, LiveState, live_fingerprint, read_live
from infra_cli.plan.model import Plan, PlanMode, Resource, ResourceChange, workspace_identity
from infra_cli.plan.outputs import OutputValue, output_values
from infra_cli.plan.smoke_pending import changed_smokes, pending_smokes, smoke_inputs
from infra_cli.stack.addresses import EVERY_KIND, parsed
from infra_cli.stack.load import LoadedStack
from infra_cli.state.records import SmokeInputs, SmokeRecord
from infra_cli.stack.variables import Inputs
from infra_cli.validate.engine import load_valid_stack
from infra_cli.knowledge.curated import CURATED_PREFIX, close_names, parse_environment_reference, registry_name_forms
from infra_cli.plan.preflight import LIVE_JUDGED_RULES, preflight
from infra_cli.plan.referenced import referenced_computes, serverless_costs, serverless_preflight
from infra_cli.validate.rules.resources import IMPORT_UNDECLARED
from infra_cli.validate.rules.switches import without_switched_off


@dataclass
class PlanOutcome:
    plan: Plan
    loaded: LoadedStack
    provider: Provider  # the provider the plan read with, which apply then writes with
    live: LiveState | None
    # distribution -> what its smoke is judged on now (the desired resources, curated environments as resolved
    # by this plan): what the smoke after apply records its verdicts against
    smoke_inputs: dict[str, SmokeInputs] = field(default_factory=dict)
    outputs: dict[str, OutputValue] = field(default_factory=dict)  # as they will be: unknown ones are UNKNOWN
    replace: list[str] = field(default_factory=list)   # --replace ADDR: what apply plans again with, under the lock
    targets: list[str] = field(default_factory=list)   # --target ADDR: likewise


def check_addresses(file: str, targets: Sequence[str] = (), replace: Sequence[str] = ()) -> None:
    """--target and --replace held to the address grammar (stack/addresses.py): called before the provider is
    built, so text that is not an address never reaches Azure, nor anything read from it."""
    for t in targets:
        parsed(t, EVERY_KIND, file=file, what="--target")
    for a in replace:
        parsed(a, file=file, what="--replace")


def check_targets(loaded: LoadedStack, desired: list[Resource], targets: list[str]) -> None:
    check_addresses(loaded.file, targets=targets)   # the grammar first, then whether the stack has it
    known = {r.address for r in desired} | {f"smoke.{d}" for d in loaded.stack.distributions}
    bad = [t for t in targets if t not in known]
    if bad:
        raise DiagnosticError([Diagnostic("error", "plan.unknown-target", f"--target {t} is not an address of this stack",
                                          loaded.file, None, None, f"addresses: {', '.join(sorted(known))}")
                               for t in bad])


def targeting_warning(file: str) -> Diagnostic:
    """Terraform's warning on every plan, apply and destroy made with -target
    (https://developer.hashicorp.com/terraform/cli/commands/plan#resource-targeting)."""
    return Diagnostic("warning", "plan.targeting", "Resource targeting is in effect: this plan may not represent "
                      "all of the changes the stack calls for", file, None, None,
                      "--target is not for routine use: it is for exceptional situations, such as recovering from "
                      "errors or mistakes; plan without it before the next change")


# A registry that lists no more environments than this has them all named in the hint of a name that is not
# there (the local Azure's azureml registry does); a longer list is `az ml environment list --registry-name R`'s.
NAMES_SAID = 16
VERSIONS_SAID = 6


def _names(provider: Provider, registry: str | None, listed: dict[str | None, list[str]]) -> list[str]:
    if registry not in listed:
        try:
            listed[registry] = provider.environment_names(registry)
        except Exception:  # the list is a courtesy: an error reading it leaves the hint without it
            listed[registry] = []
    return listed[registry]


def _did_you_mean(provider: Provider, reference: str, listed: dict[str | None, list[str]]) -> str:
    """The reference with its name swapped for the closest names the registry (or workspace) lists."""
    ref = parse_environment_reference(reference)
    # written as a workspace-form curated name (AzureML-...): suggested in that form, which names the registry
    prefix = ref.name[:len(CURATED_PREFIX)] if len(registry_name_forms(ref.name)) > 1 else ""
    close = [m if not prefix or m.lower().startswith(CURATED_PREFIX.lower()) else prefix + m
             for m in close_names(ref.name, _names(provider, ref.registry, listed))]
    close = [m for m in close if m.lower() != ref.name.lower()]
    return "did you mean " + " or ".join(reference.replace(ref.name, m, 1) for m in close) + "? " if close else ""


def _versions_said(versions: list[str]) -> str:
    """Versions as a registry lists them (newest first): a run of numbers as `versions 1 to 10`, else the newest
    few and how many older ones there are."""
    numbers = sorted(int(v) for v in versions if v.isdigit())
    if len(numbers) == len(versions) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"versions {numbers[0]} to {numbers[-1]}"
    older = f" and {len(versions) - VERSIONS_SAID} older" if len(versions) > VERSIONS_SAID else ""
    return ("version " if len(versions) == 1 else "versions ") + ", ".join(versions[:VERSIONS_SAID]) + older


def _other_versions(provider: Provider, reference: str) -> list[str]:
    try:
        return provider.environment_versions(reference)
    except Exception:  # a courtesy, as the names: an error reading them leaves the message as it was
        return []


def _pin_instead(reference: str, version: str, newest: str) -> str:
    """What to write instead of a reference to a version that does not exist: a version there is, or the label
    latest (`azureml:N:V` -> `azureml:N@latest`, `.../versions/V` -> `.../labels/latest`)."""
    head = reference[:len(reference) - len(version)]
    if not reference.endswith(version) or not head.endswith((":", "/versions/")):
        return ""
    latest = head.removesuffix("/versions/") + "/labels/latest" if head.endswith("/versions/") else \
        head[:-1] + "@latest"
    return f"pin a version it has, as `{head}{newest}`, or follow the newest with `{latest}`"


def unresolved_environments(loaded: LoadedStack, references: dict[str, str],
                            resolved: dict[str, str | None], provider: Provider | None = None) -> list[Diagnostic]:
    """An environment reference that names nothing (a typo, a version that does not exist): the job would be
    refused at submit time, so the plan says so now, at the stack's line, with what the registry (or workspace)
    has: the versions of that name, else the closest names it lists (all of them, when there are few)."""
    out = []
    listed: dict[str | None, list[str]] = {}
    for name, reference in references.items():
        if resolved.get(name) is not None:
            continue
        ref = parse_environment_reference(reference)
        where = f"registry {ref.registry!r}" if ref.registry else f"workspace {loaded.stack.workspace.name!r}"
        what = f"version {ref.version}" if ref.version else f"label {ref.label!r}"
        listing = environment_listing(ref.registry)
        versions = _other_versions(provider, reference) if provider is not None and ref.version else []
        if versions:   # the name is there, the version is not: say the ones there are
            message = (f"environment {name!r}: {reference} does not exist ({where} has {_versions_said(versions)} "
                       f"of {ref.name!r}; label latest is {versions[0]})")
            # versions are read only for a reference with a version
            hint = (_pin_instead(reference, ref.version, versions[0]) if ref.version else None) or \
                says("check the version with ", listing)
        else:
            message = f"environment {name!r}: {reference} does not exist ({ref.name!r} with {what} is not in {where})"
            close = _did_you_mean(provider, reference, listed) if provider is not None else ""
            names = _names(provider, ref.registry, listed) if provider is not None and ref.registry else []
            if ref.registry and not close and 0 < len(names) <= NAMES_SAID:
                hint = f"{where} lists: {', '.join(sorted(names, key=str.lower))}"
            elif ref.registry and close and 0 < len(names) <= NAMES_SAID:
                hint = close.rstrip()
            else:
                hint = says(close, "check the name and version with ", listing)
        out.append(loaded.source.diagnostic(("environments", name, "curated"), "plan.environment-not-found",
                                            message, hint))
    return out


def environment_listing(registry: str | None) -> NextStep:
    """The az command that lists the environments of a registry (or of the workspace: None). The stack's state lists
    none of a registry's environments: only the workspace's listing has an infra command instead on the local Azure
    (whose registry has every name said in the hint: NAMES_SAID)."""
    if registry:
        return NextStep(LIST_ENVIRONMENTS, ("--registry-name", registry))
    return NextStep(LIST_ENVIRONMENTS, local_instead=LIST_INSTEAD)


def cpu_transports(loaded: LoadedStack) -> list[Diagnostic]:
    """What a distribution across CPU nodes talks over, said in the plan (validate says nothing: CPU jobs run
    across nodes over TCP, gloo's and MPI's sockets, and need no InfiniBand); GPU sizes without InfiniBand get
    validate's distribution.multinode-without-infiniband, which names the transport itself."""
    catalog, out = load_catalog(), []
    for name, dist in loaded.stack.distributions.items():
        size = loaded.stack.size_of(dist)   # a cluster's size, a serverless instance_type
        sku = catalog.get(size) if size is not None and dist.instance_count > 1 else None
        if sku is None or sku.gpus or sku.infiniband_eligible or sku.rdma:
            continue
        out.append(loaded.source.diagnostic(
            ("distributions", name, "instance_count"), "plan.transport",
            f"distribution {name!r} runs on {dist.instance_count} nodes of {sku.name} (no GPUs): its processes talk "
            f"across nodes over {sku.sockets_between_nodes}, as CPU jobs do",
            says("nothing to do; CPU MPI at HPC scale runs on an InfiniBand size (HB, HC, HX: ",
                 NextStep(("infra", "skus"), ("--infiniband",)), ")"),
            "info"))
    return out


def compute_reader(provider: Provider) -> Callable[[str], dict[str, Any] | None]:
    """A workspace compute by name, as plain values (None: none): read by the cluster kind's codec (azure/kinds.py
    Computes), which reads any of the workspace's computes, managed by the stack or not (a Kubernetes one too)."""
    return partial(provider.read, "cluster")


def with_resolved_environments(changes: list[ResourceChange], resolved: dict[str, str | None]) -> list[ResourceChange]:
    """Curated environments are only read: their change shows what the reference resolves to now."""
    # by name: `resolved` holds curated references only (another kind's resource of the same name is none of them)
    return [replace(c, after={**(c.after or {}), "resolved": resolved[c.name]})
            if KINDS[c.type].resolves_curated and resolved.get(c.name) else c for c in changes]


# A stack field -> the plan attribute that carries it, where the names differ (plan/desired.py).
_ATTRIBUTE_OF_FIELD = {"network_settings": "subnet", "ssh_settings": "ssh_admin_username",
                       "identity": "user_assigned_identities"}


def with_sensitive(changes: list[ResourceChange], source) -> list[ResourceChange]:
    """Values interpolated from ${VAR} are sensitive (as Terraform's `sensitive`): shown "(sensitive value)"."""
    paths: dict[str, set] = {}
    kind_of = {kind.section: kind.name for kind in KINDS.values()}   # a stack section -> its kind's name
    for p in source.interpolated:
        if len(p) >= 3 and p[0] in kind_of:
            if p[2] == "ssh_settings" and p[3:4] != ("admin_username",):
                continue  # the key and password are shown as their (already masked) credentials hash
            key = _ATTRIBUTE_OF_FIELD.get(p[2], p[2])
            sensitive = (key, p[3]) if key == "tags" and len(p) >= 4 else (key,)
            address = f"{kind_of[p[0]]}.{p[1]}"
            paths.setdefault(address, set()).add(sensitive)
            if key == "curated":   # what a sensitive reference resolves to names the same registry
                paths[address].add(("resolved",))
    return [replace(c, sensitive=tuple(sorted(paths[c.address]))) if c.address in paths else c for c in changes]


def smoke_reasons(loaded: LoadedStack, inputs: dict[str, SmokeInputs], changes: list[ResourceChange],
                  deps: dict[str, tuple[str, ...]], records: dict[str, SmokeRecord | None],
                  targets: list[str]) -> dict[str, str]:
    """smoke.DIST -> why it will run: its cluster or environment changes in this plan, or its last recorded
    smoke did not pass with the inputs it has now (failed, never ran, or ran on other inputs)."""
    enabled = {n for n, d in loaded.stack.distributions.items() if d.smoke.enabled}
    pending = pending_smokes(inputs, records, enabled)
    if targets:
        pending = {job: why for job, why in pending.items() if job in targets or set(deps.get(job, ())) & set(targets)}
    # `smoke: {enabled: false}` runs no smoke after apply, whatever changed
    changed = {job: why for job, why in changed_smokes(changes, deps).items() if job.split(".", 1)[1] in enabled}
    return {**pending, **changed}


def planned_changes(loaded: LoadedStack, desired: list[Resource], live: LiveState, *, mode: str,
                    targets: list[str], replace: Sequence[str] = ()) -> tuple[list[ResourceChange], list[Diagnostic]]:
    """The changes (and the diff's diagnostics) that take `live` to `desired`: what plan records, and what apply
    derives again under the lock to check a plan file against. Pure. `replace`: --replace ADDR."""
    imports = {b.to: b.id for b in loaded.stack.imports} if mode == "normal" else {}  # in the file's order
    result = diff(desired, live, stack=loaded.stack.stack, source=loaded.source,
                  mode="destroy" if mode == "destroy" else "normal", imports=imports)
    changes, diagnostics = result.changes, result.diagnostics
    if replace and mode == "normal":
        changes, refused = force_replace(changes, list(replace), loaded.source)
        diagnostics = diagnostics + refused
    if targets:
        changes = select_targets(changes, targets, distribution_dependencies(loaded.stack),
                                 destroying=mode == "destroy")
    return changes, diagnostics


def check_replace(loaded: LoadedStack, desired: list[Resource], replace: list[str]) -> None:
    """--replace names a cluster or an environment of the stack."""
    check_addresses(loaded.file, replace=replace)   # the grammar first, then whether the stack has it
    known = sorted(r.address for r in desired if KINDS[r.type].managed(r))
    bad = [a for a in replace if a not in known]
    if bad:
        raise DiagnosticError([Diagnostic("error", "plan.unknown-replace", f"--replace {a} is not a cluster or "
                                          "environment this stack creates (a curated one is only read)",
                                          loaded.file, None, None,
                                          f"addresses: {', '.join(known) or 'none'}") for a in bad])


def plan_stack(loaded: LoadedStack, provider: Provider, *, mode: str = "normal", targets: list[str] | None = None,
               warnings: list[Diagnostic] | None = None, check_images: bool = False,
               replace: list[str] | None = None, parallelism: int = DEFAULT_READS) -> PlanOutcome:
    """The plan of a loaded, validated stack against what `provider` reads (built by the command: Azure, or the
    local emulator), at most `parallelism` of its live reads at once (`infra plan -parallelism=N`)."""
    stack = loaded.stack
    desired = desired_resources(loaded)
    targets = targets or []
    check_targets(loaded, desired, targets)
    replace = replace or []
    check_replace(loaded, desired, replace)
    normal = mode == "normal"
    curated = {name: env.curated for name, env in stack.environments.items() if env.curated} if normal else {}
    with read_pool(1) as pool:   # reading layers overlaps the live reads
        images_f = pool.submit(image_requirement_diagnostics, loaded) if check_images else None
        read = read_live(provider, desired, location=stack.workspace.location if normal else None, curated=curated,
                         stack=stack.stack if normal else None, distributions=list(stack.distributions),
                         serial_of=stack.stack, parallelism=parallelism)
        image_diagnostics = images_f.result() if images_f else []
    live, facts, resolved, records = read.state, read.facts, read.resolved, read.records
    changes, found = planned_changes(loaded, desired, live, mode=mode, targets=targets, replace=replace)
    deps = distribution_dependencies(stack)
    diagnostics = list(warnings or []) + ([targeting_warning(loaded.file)] if targets else []) + found + \
        image_diagnostics + (
        cpu_transports(loaded) + template_build_diagnostics(loaded) if normal else [])
    if facts is not None:
        diagnostics += preflight(changes, desired, facts, load_catalog(), loaded.source, stack.workspace.name)
        diagnostics += serverless_preflight(loaded, facts, load_catalog()) if normal else []
    diagnostics += referenced_computes(loaded, compute_reader(provider), load_catalog()) + \
        serverless_costs(loaded, load_catalog()) if normal else []
    diagnostics += unresolved_environments(loaded, curated, resolved, provider)
    diagnostics = without_switched_off(stack, diagnostics)   # the stack's `rules:` (preflight judges rules again)
    changes = with_sensitive(with_resolved_environments(changes, resolved), loaded.source)
    drifted = with_sensitive(drift(desired, live, stack=stack.stack), loaded.source) if mode == "refresh-only" else []
    inputs = smoke_inputs(loaded, desired, resolved.get) if normal else {}
    reasons = smoke_reasons(loaded, inputs, changes, deps, records, targets) if normal else {}
    plan = Plan(
        stack=stack.stack, mode=PlanMode(mode),
        resource_changes=[] if mode == "refresh-only" else changes,
        smoke_jobs=sorted(reasons),   # changed_smokes' and pending ones (empty unless a normal plan)
        diagnostics=list(diagnostics),
        live_fingerprint=live_fingerprint(live), desired=desired, drift=drifted, smoke_reasons=reasons,
        workspace=workspace_identity(stack.workspace), state=read.serial, configuration=configuration(stack),
    )
    outputs = output_values(loaded, live, records, resolved, changes=changes, pending=reasons) if normal else {}
    return PlanOutcome(plan, loaded, provider, live, inputs, outputs, replace, targets)


def current_smoke_inputs(loaded: LoadedStack, provider: Provider, distributions: list[str]) -> dict[str, SmokeInputs]:
    """What `infra smoke` records its verdicts against: the smoke inputs now, the curated environments of
    `distributions` resolved as plan resolves them. Taken before any job is submitted."""
    envs, dists = loaded.stack.environments, loaded.stack.distributions
    used = {dists[d].environment for d in distributions if d in dists}
    curated = {n: envs[n].curated for n in used if n in envs and envs[n].curated}
    resolved = provider.resolve_environments(curated)
    return smoke_inputs(loaded, desired_resources(loaded), resolved.get)


def smoke_preflight(loaded: LoadedStack, provider: Provider, distributions: list[str]) -> list[Diagnostic]:
    """Before `infra smoke` submits anything: each chosen distribution's cluster, and its environment (a custom
    one, its pinned version if it pins one: curated ones are resolved by current_smoke_inputs), must exist, or the job would be refused
    at submit time with no word of why. One error per missing resource, at the distribution's line, with the
    command that creates it (`infra apply STACK`)."""
    dists, envs = loaded.stack.distributions, loaded.stack.environments
    chosen = [d for d in distributions if d in dists]
    desired = {r.address: r for r in desired_resources(loaded)}
    clusters = sorted({dists[d].cluster for d in chosen if dists[d].cluster is not None}   # serverless: none
                      | {dists[d].compute_name for d in chosen if dists[d].compute_name and not dists[d].virtual_cluster})
    wanted = {n: desired[f"environment.{n}"].attributes.get("version")
              for n in sorted({dists[d].environment for d in chosen})
              if n in envs and not envs[n].curated and f"environment.{n}" in desired}
    with read_pool(len(clusters)) as pool:
        live_clusters = dict(zip(clusters, pool.map(compute_reader(provider), clusters)))
    live_envs = provider.read_environments(wanted) if wanted else {}
    hint = says("run ", NextStep(("infra", "apply"), (loaded.source.file,)), " first: a smoke job runs on the cluster "
                "and environment apply creates (", NextStep(("infra", "plan"), (loaded.source.file,)),
                " shows what it would create)")
    where = f"workspace {loaded.stack.workspace.name!r}"
    out = []
    for d in chosen:
        cluster, env = dists[d].cluster, dists[d].environment
        if cluster is not None and live_clusters.get(cluster) is None:
            out.append(loaded.source.diagnostic(("distributions", d, "cluster"), "smoke.not-applied",
                                                f"smoke.{d}: cluster {cluster!r} does not exist in {where}", hint))
        compute = None if dists[d].virtual_cluster else dists[d].compute_name   # one infra does not manage
        if compute is not None and live_clusters.get(compute) is None:
            out.append(loaded.source.diagnostic(
                ("distributions", d, "compute"), "smoke.not-applied",
                f"smoke.{d}: compute {compute!r} does not exist in {where}; infra does not manage it",
                f"attach it (az ml compute attach --type Kubernetes --name {compute} ...) or create it "
                f"(az ml compute create --type AmlCompute --name {compute} ...) first"))
        if env in wanted and (live_envs.get(env) or {}).get("version") is None:
            version = f" version {wanted[env]}" if wanted[env] else ""
            out.append(loaded.source.diagnostic(
                ("distributions", d, "environment"), "smoke.not-applied",
                f"smoke.{d}: environment {env!r}{version} does not exist in {where}", hint))
    return out


def load_for_plan(stack_path: Path, *, generating: bool = False,
                  inputs: Inputs | None = None) -> tuple[LoadedStack, list[Diagnostic]]:
    """The stack, validated, and its warnings; the rules the plan judges against the live state are left to
    its preflight. `generating` (--generate-config-out): an import block may name what the stack does not
    declare yet (plan/generate.py writes its declaration). `inputs`: the run's --var / --var-file."""
    return load_valid_stack(stack_path, judged_live=LIVE_JUDGED_RULES | ({IMPORT_UNDECLARED} if generating else set()),
                            inputs=inputs)
