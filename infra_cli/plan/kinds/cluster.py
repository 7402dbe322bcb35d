"""The cluster kind (an AmlCompute cluster): how its change is judged (Azure ML's update semantics,
validators/update_semantics.yaml: scale settings, tags, description change in place; size, tier, subnet, public
IP, SSH settings and location force delete + create), what makes a live one unusable (Failed, Canceled, being
deleted, or creating for longer than a bound: replaced, with the state and Azure's error as the reason; it never
counts as converged), prevent_destroy, what --replace does to it, and its drift."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from infra_cli.azure.protocol import Provider
from infra_cli.conventions import TAG_HASH
from infra_cli.diagnostics import Diagnostic
from infra_cli.knowledge.update_semantics import provisioning_rules, semantics
from infra_cli.knowledge.skus import load_catalog
from infra_cli.plan.declaration import literal, secret_variable
from infra_cli.plan.desired import live_comparable
from infra_cli.plan.kinds.base import REPLACE_REQUESTED, DiffContext, Kind, adopted, import_at
from infra_cli.plan.live import LiveState, read_cluster
from infra_cli.plan.model import (CREATE, DELETE, NO_OP, REPLACE, UPDATE, Action, Resource, ResourceChange,
                                  content_hash)
from infra_cli.plan.normalise import is_other_compute, without_provisioning
from infra_cli.stack.cluster_fields import CLUSTER_FIELDS
from infra_cli.stack.model import Stack
from infra_cli.stack.outputs import UNKNOWN
from infra_cli.stack.source import SourceMap
from infra_cli.stack.variables import ENV_PREFIX

# the plan attributes that are not the stack's to write: infra's own, secrets, and live state
_NOT_DECLARED = {"ssh_credentials_hash", "prevent_destroy", "user_assigned_identities", "tags",
                 "provisioning_state", "provisioning_error", "provisioning_since"}
_ARM = ("/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.MachineLearningServices/workspaces/{w}"
        "/computes/{n}")
UNREPORTED = "update_after_create: "  # the reason of a cluster whose settings Azure has not reported yet


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
        import_at(imports, change.address), "import.forces-replacement",
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


def replace_change(c: ResourceChange) -> ResourceChange:
    reason = c.action_reason if c.actions == REPLACE else ""
    return ResourceChange(c.address, c.type, c.name, REPLACE, c.before, c.after, c.replace_paths if reason else [],
                          f"replace_by_request: {REPLACE_REQUESTED}" + (f"; {reason}" if reason else ""))


def _as_adopted(desired: Resource, live: Resource) -> Resource:
    """Azure never returns SSH secrets, and a cluster infra did not make has no hash of them: for the same admin
    user the stack's are taken as the cluster's, as `infra import` takes them (apply sends them with the tags)."""
    a = live.attributes
    if a.get("ssh_credentials_hash") is None and a.get("ssh_admin_username") and \
            a.get("ssh_admin_username") == desired.attributes.get("ssh_admin_username"):
        return replace(live, attributes={**a, "ssh_credentials_hash": desired.attributes.get("ssh_credentials_hash")})
    return live


def cluster_declaration(attributes: dict[str, Any], name: str) -> dict[str, Any]:
    """A live cluster's plan attributes -> its stack entry (the fields the stack writes, Azure's defaults left out
    only where the stack's default is the same)."""
    out: dict[str, Any] = {}
    for f in CLUSTER_FIELDS:
        value = attributes.get(f.attribute)
        if f.stack is None or f.attribute in _NOT_DECLARED or value is None:
            continue
        if f.attribute == "ssh_public_access_enabled" and not attributes.get("ssh_admin_username"):
            continue
        holder, *rest = f.stack.split(".")
        if rest:
            out.setdefault(holder, {})[rest[0]] = value
        else:
            out[holder] = value
    if attributes.get("user_assigned_identities"):
        out.setdefault("identity", {})["user_assigned_identities"] = [
            {"resource_id": i} for i in attributes["user_assigned_identities"]]
    if attributes.get("tags"):
        out["tags"] = dict(attributes["tags"])
    out = literal(out)
    if "ssh_settings" in out:   # Azure never returns the secret: a sensitive variable of the stack supplies it
        out["ssh_settings"]["admin_password"] = "${var." + secret_variable(name, "admin_password") + "}"
    return out


class Cluster(Kind):
    name, section, az_noun, imported_noun = "cluster", "clusters", "compute", "AmlCompute cluster"
    graph_shape, sized = "box3d", True

    def declared(self, stack: Stack) -> dict[str, Any]:
        return stack.clusters

    def live(self, live: LiveState) -> dict[str, Resource]:
        return live.clusters

    def adoptable(self, current: Resource) -> bool:
        return not current.owner_stack and not is_other_compute(current)

    def judge(self, res: Resource, current: Resource | None, adopt: bool, ctx: DiffContext
              ) -> tuple[list[ResourceChange], list[Diagnostic]]:
        if current is None:
            return [ResourceChange(res.address, "cluster", res.name, CREATE, None, res.attributes, [],
                                   "new cluster")], []
        change = _cluster_change(res, _as_adopted(res, current) if adopt else current, ctx.now)
        if adopt:
            change = adopted(change, res.name)
        refused = None
        if change.actions == REPLACE:
            fields = ", ".join(p[0] for p in change.replace_paths)
            protected = _protection(res.name, res.attributes, current.attributes, ctx.source,
                                    f"must be replaced ({fields})",
                                    "set lifecycle.prevent_destroy: false and apply that first, or keep the old value")
            refused = protected or (_import_replaces(change, ctx.imports, ctx.source) if adopt else None)
        return [change], [refused] if refused else []

    def diff_undeclared(self, desired: list[Resource], live: LiveState, ctx: DiffContext
                        ) -> tuple[list[ResourceChange], list[Diagnostic]]:
        """Each of this stack's clusters the stack no longer declares (every one, on destroy) is deleted."""
        declared_by_name = {r.name: r for r in desired if r.type == self.name}
        changes, diagnostics = [], []
        for name, current in sorted(live.clusters.items()):
            if current.owner_stack != ctx.stack or (ctx.mode != "destroy" and name in declared_by_name):
                continue
            declared = declared_by_name.get(name)
            protected = _protection(name, declared.attributes if declared else None, current.attributes,
                                    ctx.source, "would be destroyed",
                                    f"set clusters.{name}.lifecycle.prevent_destroy: false and apply it, then destroy")
            if protected:
                diagnostics.append(protected)
            changes.append(ResourceChange(current.address, "cluster", name, DELETE, current.attributes, None, [],
                                          "destroy requested" if ctx.mode == "destroy" else "no longer in the stack"))
        return changes, diagnostics

    def replace_requested(self, c: ResourceChange, source: SourceMap
                          ) -> tuple[list[ResourceChange], list[Diagnostic]] | None:
        """Deleted and created again (`-/+`) even without a change; a create stays a create."""
        if c.actions not in (NO_OP, UPDATE, REPLACE):
            return None
        protected = c.actions != REPLACE and _protection(   # a forced replacement: diff already refused it
            c.name, c.after, c.before, source, f"would be replaced (--replace {c.address})",
            f"leave out --replace {c.address}, or set clusters.{c.name}.lifecycle.prevent_destroy: false and "
            "apply that first")
        return [replace_change(c)], [protected] if protected else []

    def drift(self, desired: list[Resource], live: LiveState, stack: str) -> list[ResourceChange]:
        """Owned clusters whose live attributes no longer hash to what infra last wrote. infra's last write is
        known exactly when the stack still hashes to the same value (then `before` is the stack's attributes);
        otherwise `before` is unknown and only the fact of drift is reported."""
        by_name = {r.name: r for r in desired if r.type == self.name}
        out = []
        for name, current in sorted(live.clusters.items()):
            if current.owner_stack != stack or settings_unreported(current.attributes):
                continue  # not the stack's, or Azure has not reported its settings yet: nothing to say changed
            written = current.tags.get(TAG_HASH)
            if written is None or content_hash(live_comparable(without_provisioning(current.attributes))) == written:
                continue
            want = by_name.get(name)
            before = want.attributes if want is not None and want.tags.get(TAG_HASH) == written else None
            changed = sorted(k for k in current.attributes
                             if before is not None and before.get(k) != current.attributes.get(k))
            out.append(ResourceChange(current.address, "cluster", name, UPDATE, before, current.attributes, [],
                                      "changed outside infra" + (f": {', '.join(changed)}" if changed else "")))
        return out


    def output(self, name: str, attribute: str, change: ResourceChange | None, live: LiveState, stack: Stack,
               resolved: dict[str, str | None]) -> Any:
        ws = stack.workspace

        def values(a: dict, state: Any) -> dict:
            return {"id": _ARM.format(s=ws.subscription_id, g=ws.resource_group, w=ws.name, n=name), "name": name,
                    "size": a.get("size"), "max_instances": a.get("max_instances"), "location": a.get("location"),
                    "provisioning_state": state}

        if change is not None and change.action in (Action.CREATE, Action.REPLACE):
            # created or replaced: what the stack sets is known, Azure's state is not
            return values(change.after or {}, UNKNOWN).get(attribute)
        r = live.clusters.get(name)
        if r is None or r.owner_stack != stack.stack:
            return None
        a = change.after if change is not None and change.action is Action.UPDATE and change.after else r.attributes
        return values(a, a.get("provisioning_state") or "Succeeded").get(attribute)   # an update: what it sets

    def read_imported(self, provider: Provider, wanted: list[tuple[int, str]], imports: list[Any]) -> dict[int, Any]:
        return {i: read_cluster(provider, imports[i].id) for i, _ in wanted}

    def declaration(self, name: str, azure_name: str, read: Any, where: str
                    ) -> tuple[dict[str, Any], list[str]] | None:
        if read is None or is_other_compute(read):
            return None
        notes = [f"cluster.{name}: read from Azure ML compute {azure_name!r} (AmlCompute) in {where}"]
        if read.owner_stack:
            notes.append(f"it carries stack {read.owner_stack!r}'s ownership tags")
        body = cluster_declaration(read.attributes, name)
        sku = load_catalog().get(str(read.attributes.get("size") or ""))
        if sku is not None and sku.infiniband_eligible:   # what the live size has, the stack requires
            body["infiniband"] = "required"
        if "ssh_settings" in body:
            variable = secret_variable(name, "admin_password")
            notes.append(f"its admin password is the sensitive variable {variable} (declared under variables:): set it with "
                         f"--var {variable}=... or {ENV_PREFIX}{variable}; Azure never returns it")
        return body, notes


CLUSTER = Cluster()
