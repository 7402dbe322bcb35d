"""diff: desired resources x live resources -> changes. Pure: no I/O, no SDK.

Rules (Azure ML's, from validators/update_semantics.yaml): scale settings, tags, description change in
place; size, tier, subnet, public IP, SSH settings and location force delete + create; environment
versions are immutable, so changed content is a NEW version. Resources are touched only when they carry
this stack's ownership tag; a same-named resource without it is an error that says how to adopt it.
A cluster that is Failed, Canceled, being deleted, or creating for longer than a bound is replaced, with the
state (and Azure's error) as the reason: it never counts as converged.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from infra_cli.diagnostics import Diagnostic
from infra_cli.plan.desired import live_comparable
from infra_cli.plan.live import LiveState
from infra_cli.conventions import TAG_HASH
from infra_cli.plan.model import CREATE, DELETE, NO_OP, REPLACE, UPDATE, Resource, ResourceChange, content_hash
from infra_cli.plan.normalise import is_other_compute, without_provisioning
from infra_cli.knowledge.update_semantics import provisioning_rules, semantics
from infra_cli.stack.source import SourceMap


@dataclass
class DiffResult:
    changes: list[ResourceChange]
    diagnostics: list[Diagnostic]
    drift: list[ResourceChange] = field(default_factory=list)


def _section(kind: str) -> str:
    return {"cluster": "clusters", "environment": "environments"}[kind]


def _not_owned(address: str, name: str, kind: str, live: Resource, stack: str, source: SourceMap) -> Diagnostic:
    owner = live.owner_stack
    at = (_section(kind), name)
    if is_other_compute(live):
        return source.diagnostic(at, "plan.name-taken-by-other-compute",
                                 f"{kind} {name!r}: the workspace already has a compute of that name that is not an "
                                 f"AmlCompute cluster ({live.attributes['compute_type']}); infra manages AmlCompute "
                                 "clusters only and will not touch it",
                                 f"rename {address} in this stack (a workspace's compute names are unique)", key=True)
    if owner and owner != stack:
        return source.diagnostic(at, "plan.owned-by-other-stack",
                                 f"{kind} {name!r} exists in Azure but belongs to stack {owner!r}, not {stack!r}",
                                 f"rename {address} in this stack, or remove it from stack {owner!r} first", key=True)
    hint = (f"adopt it with an import block (`import: [{{to: {address}, id: {name}}}]`) or "
            f"`infra import {address} {name} {source.file}`, or rename {address}")
    return source.diagnostic(at, "plan.unmanaged-resource",
                             f"{kind} {name!r} already exists in Azure without this stack's ownership tag; "
                             "the plan will not touch it", hint, key=True)


def _import_missing(res: Resource, imports: dict[str, str], source: SourceMap) -> Diagnostic:
    """Terraform's "Cannot import non-existent remote object"."""
    return source.diagnostic(_import_at(imports, res.address), "import.not-found",
                             f"import of {res.address}: there is no {res.type} {imports[res.address]!r} in the "
                             "workspace to import", f"check the name (`az ml {'compute' if res.type == 'cluster' else 'environment'} "
                             "list`), or remove the import block to let infra create it")


def _protection(name: str, desired: dict | None, live: dict, source: SourceMap, what: str,
                in_stack_hint: str) -> Diagnostic | None:
    """prevent_destroy from the stack (as written now: `desired`, its attributes) or from the live tag (as last
    applied: `live`'s attributes), either wins."""
    if desired is not None and desired.get("prevent_destroy"):
        return source.diagnostic(("clusters", name, "lifecycle", "prevent_destroy"), "plan.prevent-destroy",
                                 f"cluster.{name} {what}, but the stack sets lifecycle.prevent_destroy",
                                 in_stack_hint)
    if live.get("prevent_destroy"):
        if desired is not None:
            return source.diagnostic(("clusters", name), "plan.prevent-destroy",
                                     f"cluster.{name} {what}, but it was applied with lifecycle.prevent_destroy",
                                     in_stack_hint, key=True)
        return Diagnostic("error", "plan.prevent-destroy",
                          f"cluster.{name} {what}, but it was applied with lifecycle.prevent_destroy", source.file,
                          None, None, f"put clusters.{name} back in the stack, or set lifecycle.prevent_destroy: "
                          "false on it and apply before removing it")
    return None


def _import_replaces(change: ResourceChange, imports: dict[str, str], source: SourceMap) -> Diagnostic | None:
    """An import block adopts a cluster to keep it: a declaration that differs from it in a field Azure cannot
    change in place would have the same apply destroy what it imports. A plan error, not `-/+`."""
    fields = [p[0] for p in change.replace_paths if p[0] != "provisioning_state"]
    if not fields:   # replaced only because its last operation failed: nothing of the declaration forces it
        return None
    live = ", ".join(f"{f} = {change.before.get(f)!r}" for f in fields)
    return source.diagnostic(
        _import_at(imports, change.address), "import.forces-replacement",
        f"import of {change.address}: the stack declares it with another {', '.join(fields)} than the cluster "
        f"{imports[change.address]!r} has ({live}), which Azure cannot change in place: the apply would destroy "
        "the cluster it imports and create another",
        f"declare clusters.{change.name} as it is live (`infra plan {source.file} --generate-config-out FILE` writes "
        "it), apply the import, then change it in a later plan (or, to recreate it on purpose, import it first and "
        f"plan with `--replace {change.address}`)")


def _timestamp(value: object) -> float | None:
    """An ISO 8601 time as Azure writes it (7 fractional digits, Z or an offset) -> epoch seconds."""
    if isinstance(value, datetime):
        moment = value
    else:
        m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?", str(value or "").strip())
        if not m:
            return None
        zone = m.group(3) or "+00:00"
        moment = datetime.fromisoformat(m.group(1) + (m.group(2) or "")[:7] + ("+00:00" if zone == "Z" else zone))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def provisioning_problem(attributes: dict, now: float | None = None) -> str | None:
    """Why a live cluster's provisioningState makes it unusable as it is, or None."""
    state = attributes.get("provisioning_state")
    if not state:
        return None
    rules = provisioning_rules()
    error = attributes.get("provisioning_error")
    if state in rules.replace:
        return f"provisioningState is {state}: {rules.replace[state]}" + (f" ({error})" if error else "")
    bound = rules.stuck_after_s.get(state)
    since = _timestamp(attributes.get("provisioning_since"))
    if bound is not None and since is not None:
        age = (time.time() if now is None else now) - since
        if age > bound:
            return (f"provisioningState is {state} since {attributes['provisioning_since']} ({age / 60:.0f} min, "
                    f"more than the {bound / 60:.0f} min a create may take): taken as stuck")
    return None


UNREPORTED = "update_after_create: "  # the reason of a cluster whose settings Azure has not reported yet


def settings_unreported(attributes: dict) -> bool:
    """A live cluster whose settings Azure's answer did not carry (an operation runs on it, or its properties are
    null: azure/compute_codec.py settings_reported): its size, which every reported AmlCompute has, is unknown."""
    return attributes.get("size") is None and "compute_type" not in attributes


def _unreported_change(desired: Resource, live: Resource) -> ResourceChange:
    """Nothing to compare: apply waits for the operation to finish (apply/executor.py _settled), then compares
    and puts the stack's settings. Never a replacement on values Azure has not sent."""
    state = live.attributes.get("provisioning_state")
    why = (f"provisioningState is {state} and Azure reports no settings until it finishes: apply waits for it, "
           "then puts the stack's settings" if state else
           "Azure answered no settings for it: apply puts the stack's settings")
    return ResourceChange(desired.address, "cluster", desired.name, UPDATE, live.attributes, desired.attributes, [],
                          UNREPORTED + why)


def _cluster_change(desired: Resource, live: Resource, now: float | None = None) -> ResourceChange:
    rules = semantics("cluster")
    before, after = live.attributes, desired.attributes
    unreported = settings_unreported(before)
    changed = [k for k in after if before.get(k) != after.get(k)] if not unreported else []
    forcing = [k for k in changed if k in rules.force_replacement]
    problem = provisioning_problem(before, now)
    if unreported and not problem:
        return _unreported_change(desired, live)
    if problem:
        reasons = [problem] + [rules.force_replacement[k] for k in forcing]
        return ResourceChange(desired.address, "cluster", desired.name, REPLACE, before, after,
                              [["provisioning_state"]] + [[k] for k in forcing],
                              f"replace_because_tainted: {'; '.join(reasons)}")
    if forcing:
        reason = "; ".join(rules.force_replacement[k] for k in forcing)
        return ResourceChange(desired.address, "cluster", desired.name, REPLACE, before, after,
                              [[k] for k in forcing], f"replace_because_cannot_update: {reason}")
    if changed:
        return ResourceChange(desired.address, "cluster", desired.name, UPDATE, before, after, [],
                              "update_in_place: " + ", ".join(changed))
    return ResourceChange(desired.address, "cluster", desired.name, NO_OP, before, after)


def _environment_change(desired: Resource, live: Resource | None, source: SourceMap) -> tuple[ResourceChange | None, Diagnostic | None]:
    after = dict(desired.attributes)
    if after["kind"] == "curated":
        return ResourceChange(desired.address, "environment", desired.name, NO_OP, None, after, [],
                              "curated environment: resolved, never created"), None
    pinned = after.get("version")
    if live is None or live.attributes.get("version") is None:
        after["version"] = pinned or (live.attributes.get("next_version") if live else None) or "1"
        return ResourceChange(desired.address, "environment", desired.name, CREATE, None, after, [],
                              "new environment" if live is None else "new version"), None
    before = live.attributes
    if before.get("content_hash") == after["content_hash"]:
        after["version"] = before["version"]
        return ResourceChange(desired.address, "environment", desired.name, NO_OP, before, after), None
    if pinned and before.get("version") == pinned:
        return None, source.diagnostic(
            ("environments", desired.name, "version"), "plan.environment-version-immutable",
            f"environment {desired.name!r} version {pinned} already exists with different content; "
            "Azure ML environment versions are immutable",
            f"bump environments.{desired.name}.version (or remove it to let infra number versions)")
    after["version"] = pinned or before.get("next_version") or _next(before.get("version"))
    return ResourceChange(desired.address, "environment", desired.name, CREATE, before, after, [],
                          f"new version {after['version']} (versions are immutable; version "
                          f"{before.get('version')} stays for jobs that use it)"), None


REPLACE_REQUESTED = "replace requested"


def force_replace(changes: list[ResourceChange], replace: list[str], source: SourceMap) -> tuple[list[ResourceChange], list[Diagnostic]]:
    """`--replace ADDR` (Terraform's -replace): that cluster is deleted and created again (`-/+`) even without a
    change, an environment gets a new version of the same content. One the plan creates anyway stays a create."""
    out, diagnostics = [], []
    for c in changes:   # a create (nothing live yet) is none of the actions below: it stays a create, never a -/+
        if c.address not in replace:
            out.append(c)
        elif c.type == "cluster" and c.actions in (NO_OP, UPDATE, REPLACE):
            out.append(replace_change(c))
            protected = c.actions != REPLACE and _protection(   # a forced replacement: diff already refused it
                c.name, c.after, c.before, source, f"would be replaced (--replace {c.address})",
                f"leave out --replace {c.address}, or set clusters.{c.name}.lifecycle.prevent_destroy: false and "
                "apply that first")
            if protected:
                diagnostics.append(protected)
        elif c.type == "environment" and c.after and c.after.get("kind") != "curated" and c.actions == NO_OP:
            pinned = source.values.get(("environments", c.name, "version"))
            if pinned is not None:
                diagnostics.append(source.diagnostic(
                    ("environments", c.name, "version"), "plan.replace-pinned",
                    f"--replace {c.address}: its version is pinned, and Azure ML environment versions are immutable",
                    f"bump environments.{c.name}.version instead (or remove it to let infra number versions)"))
                out.append(c)
                continue
            after = {**c.after, "version": c.before.get("next_version") or _next(c.before.get("version"))}
            out.append(ResourceChange(c.address, c.type, c.name, CREATE, c.before, after, [],
                                      f"new version {after['version']} ({REPLACE_REQUESTED})"))
        else:
            out.append(c)
    return out, diagnostics


def replace_change(c: ResourceChange) -> ResourceChange:
    reason = c.action_reason if c.actions == REPLACE else ""
    return ResourceChange(c.address, c.type, c.name, REPLACE, c.before, c.after, c.replace_paths if reason else [],
                          f"replace_by_request: {REPLACE_REQUESTED}" + (f"; {reason}" if reason else ""))


def _next(version: str | None) -> str:
    return str(int(version) + 1) if version and version.isdigit() else "1"


def _import_at(imports: dict[str, str], address: str) -> tuple:
    """The stack file's place of the import block of `address`."""
    return ("import", list(imports).index(address), "id")


def _as_adopted(desired: Resource, live: Resource) -> Resource:
    """Azure never returns SSH secrets, and a cluster infra did not make has no hash of them: for the same admin
    user the stack's are taken as the cluster's, as `infra import` takes them (apply sends them with the tags)."""
    a = live.attributes
    if a.get("ssh_credentials_hash") is None and a.get("ssh_admin_username") and \
            a.get("ssh_admin_username") == desired.attributes.get("ssh_admin_username"):
        return replace(live, attributes={**a, "ssh_credentials_hash": desired.attributes.get("ssh_credentials_hash")})
    return live


def _adopted(change: ResourceChange, azure_name: str) -> ResourceChange:
    return replace(change, importing=azure_name)


def diff(desired: list[Resource], live: LiveState, *, stack: str, source: SourceMap,
         mode: str = "normal", now: float | None = None, imports: dict[str, str] | None = None) -> DiffResult:
    """`source`: where each key of the stack file is, so diagnostics point at the line that causes them.
    `now` (epoch seconds, default the clock): when a long-running create counts as stuck.
    `imports`: address -> Azure name of the stack's import blocks: an existing resource no stack owns is adopted
    (the change says `importing`) and compared as if owned; once this stack owns it the block changes nothing."""
    imports = imports or {}
    changes: list[ResourceChange] = []
    diagnostics: list[Diagnostic] = []
    desired_clusters = {r.name: r for r in desired if r.type == "cluster"}

    if mode != "destroy":
        for res in desired:
            if res.type == "cluster":
                current = live.clusters.get(res.name)
                adopt = (res.address in imports and current is not None and not current.owner_stack
                         and not is_other_compute(current))
                if res.address in imports and current is None:
                    diagnostics.append(_import_missing(res, imports, source))
                    continue
                if current is None:
                    changes.append(ResourceChange(res.address, "cluster", res.name, CREATE, None, res.attributes,
                                                  [], "new cluster"))
                elif current.owner_stack != stack and not adopt:
                    diagnostics.append(_not_owned(res.address, res.name, "cluster", current, stack, source))
                else:
                    change = _cluster_change(res, _as_adopted(res, current) if adopt else current, now)
                    if adopt:
                        change = _adopted(change, res.name)
                    if change.actions == REPLACE:
                        fields = ", ".join(p[0] for p in change.replace_paths)
                        protected = _protection(res.name, res.attributes, current.attributes, source,
                                                f"must be replaced ({fields})",
                                                "set lifecycle.prevent_destroy: false and apply that first, "
                                                "or keep the old value")
                        refused = protected or (_import_replaces(change, imports, source) if adopt else None)
                        if refused:
                            diagnostics.append(refused)
                    changes.append(change)
            else:
                current = live.environments.get(res.name)
                exists = current is not None and current.attributes.get("version")
                adopt = res.address in imports and exists and not current.owner_stack
                if res.address in imports and not exists and res.attributes["kind"] != "curated":
                    diagnostics.append(_import_missing(res, imports, source))
                    continue
                if exists and current.owner_stack != stack and not adopt:
                    diagnostics.append(_not_owned(res.address, res.name, "environment", current, stack, source))
                    continue
                change, problem = _environment_change(res, current, source)
                if change is not None and adopt:
                    change = _adopted(change, res.name)
                if problem:
                    diagnostics.append(problem)
                if change:
                    changes.append(change)

    for name, current in sorted(live.clusters.items()):
        if current.owner_stack != stack or (mode != "destroy" and name in desired_clusters):
            continue
        declared = desired_clusters.get(name)
        protected = _protection(name, declared.attributes if declared else None, current.attributes, source,
                                "would be destroyed",
                                f"set clusters.{name}.lifecycle.prevent_destroy: false and apply it, then destroy")
        if protected:
            diagnostics.append(protected)
        changes.append(ResourceChange(current.address, "cluster", name, DELETE, current.attributes, None, [],
                                      "destroy requested" if mode == "destroy" else "no longer in the stack"))
    if mode == "destroy":
        changes += _released_environments(desired, live, stack)
    return DiffResult(changes, diagnostics)


RELEASE_REASON = ("destroy requested: Azure ML never deletes environment versions (jobs may name them); they are "
                  "archived, as `az ml environment archive` does, and lose this stack's ownership tags")


def _released_environments(desired: list[Resource], live: LiveState, stack: str) -> list[ResourceChange]:
    """Destroy releases each environment whose live version this stack owns: an update of its versions (archived,
    infra's ownership tags dropped; nothing is deleted), so `state list` is empty after it and another stack may
    take the name. A curated reference is never the stack's (nothing was created)."""
    out = []
    for res in desired:
        current = live.environments.get(res.name) if res.type == "environment" else None
        if current is None or current.attributes.get("version") is None or current.owner_stack != stack:
            continue
        out.append(ResourceChange(current.address, "environment", res.name, UPDATE, current.attributes,
                                  {**current.attributes, "archived": True}, [], RELEASE_REASON))
    return out


def drift(desired: list[Resource], live: LiveState, *, stack: str) -> list[ResourceChange]:
    """Owned clusters whose live attributes no longer hash to what the tool last wrote (changed outside it).

    The tool's last write is known exactly when the stack still hashes to the same value (then `before` is the
    stack's attributes); otherwise `before` is unknown and only the fact of drift is reported.
    """
    by_name = {r.name: r for r in desired if r.type == "cluster"}
    out = []
    for name, current in sorted(live.clusters.items()):
        if current.owner_stack != stack or settings_unreported(current.attributes):
            continue  # not the stack's, or Azure has not reported its settings yet: nothing to say changed
        written = current.tags.get(TAG_HASH)
        if written is None or content_hash(live_comparable(without_provisioning(current.attributes))) == written:
            continue
        want = by_name.get(name)
        before = want.attributes if want is not None and want.tags.get(TAG_HASH) == written else None
        changed = sorted(k for k in current.attributes if before is not None and before.get(k) != current.attributes.get(k))
        out.append(ResourceChange(current.address, "cluster", name, UPDATE, before, current.attributes, [],
                                  "changed outside infra" + (f": {', '.join(changed)}" if changed else "")))
    return out


def select_targets(changes: list[ResourceChange], targets: list[str],
                   dependencies: dict[str, tuple[str, ...]]) -> list[ResourceChange]:
    """--target: keep the targeted addresses and what they depend on."""
    wanted: set[str] = set()
    for t in targets:
        wanted.add(t)
        wanted.update(dependencies.get(t, ()))
    return [c for c in changes if c.address in wanted]
