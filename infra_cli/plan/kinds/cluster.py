"""The cluster kind (an AmlCompute cluster): how its change is judged (Azure ML's update semantics,
validators/update_semantics.yaml: scale settings, tags, description change in place; size, tier, subnet, public
IP, SSH settings and location force delete + create), what makes a live one unusable (Failed, Canceled, being
deleted, or creating for longer than a bound: replaced, with the state and Azure's error as the reason; it never
counts as converged), prevent_destroy, what --replace does to it, and its drift; and both sides of the comparison:
the stack's cluster as the plan compares it (stack/cluster_fields.py's plain fields, the composite ones here) and a
live compute brought to the same shape (Azure's spellings, defaults and added tags ironed out)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from infra_cli.arguments import NextStep
from infra_cli.azure.protocol import Provider
from infra_cli.conventions import TAG_ADDRESS, TAG_HASH, TAG_PREVENT_DESTROY, TAG_SECRETS, TAG_STACK
from infra_cli.diagnostics import Diagnostic, DiagnosticError, LIST_COMPUTES, LIST_INSTEAD, SHOW_COMPUTE, says
from infra_cli.knowledge.update_semantics import provisioning_rules, semantics
from infra_cli.knowledge.skus import load_catalog
from infra_cli.plan.declaration import literal, secret_variable
from infra_cli.plan.kinds.base import REPLACE_REQUESTED, DiffContext, Kind, adopted, import_at
from infra_cli.plan.model import (CREATE, DELETE, NO_OP, REPLACE, UPDATE, Action, LiveState, Resource, ResourceChange,
                                  content_hash, secret_digest)
from infra_cli.plan.normalise import split_tags
from infra_cli.stack.cluster_fields import (CLUSTER_FIELDS, DESIRED, LIVE, PROVISIONING_KEYS, TAG_CARRIED,
                                           normalise_location, normalised, path_value)
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import Cluster as DeclaredCluster, Stack, Workspace
from infra_cli.stack.secret import Secret, contains_secret
from infra_cli.stack.outputs import UNKNOWN
from infra_cli.stack.source import SourceMap
from infra_cli.stack.variables import ENV_PREFIX

# the plan attributes that are not the stack's to write: infra's own, secrets, and live state
_NOT_DECLARED = {"ssh_credentials_hash", "prevent_destroy", "user_assigned_identities", "tags",
                 "provisioning_state", "provisioning_error", "provisioning_since"}
_ARM = ("/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.MachineLearningServices/workspaces/{w}"
        "/computes/{n}")
UNREPORTED = "update_after_create: "  # the reason of a cluster whose settings Azure has not reported yet


# ---- desired: the stack's cluster as the plan compares it ----------------------------------------------------
# Secrets never enter the attributes: SSH credentials are represented by a salted hash, which is also written as a
# tag so a later plan can tell whether they changed (Azure never returns them).

@dataclass(frozen=True)
class ClusterSecrets:
    """What a create needs but a plan must never carry."""

    admin_username: str | None = None
    admin_password: str | None = None
    ssh_key_value: str | None = None


def subnet_id(workspace: Workspace, vnet_name: str | None, subnet: str | None) -> str | None:
    """Short subnet names become the full ARM id Azure reports back; compared lower-case, as ARM ids are."""
    if not subnet:
        return None
    if subnet.startswith("/"):
        return subnet.lower()
    if not vnet_name:
        return subnet.lower()
    return (f"/subscriptions/{workspace.subscription_id}/resourcegroups/{workspace.resource_group}"
            f"/providers/microsoft.network/virtualnetworks/{vnet_name}/subnets/{subnet}").lower()


def ssh_credentials_hash(stack_name: str, cluster_name: str, secrets: ClusterSecrets) -> str | None:
    """What tells a changed SSH secret from an unchanged one, since Azure never returns the secret. It lives in a
    tag and plan files, so it is scrypt (memory-hard, ~30 ms a guess) rather than a fast hash a weak password
    could be guessed from offline; the salt makes it differ per stack and cluster."""
    if not (secrets.ssh_key_value or secrets.admin_password):
        return None
    return secret_digest(f"infra-ssh/{stack_name}/{cluster_name}",
                         [secrets.ssh_key_value or "", secrets.admin_password or ""])


def cluster_secrets(cluster: DeclaredCluster) -> ClusterSecrets:
    ssh = cluster.ssh_settings
    if ssh is None:
        return ClusterSecrets()
    return ClusterSecrets(
        ssh.admin_username,
        ssh.admin_password.get_secret_value() if ssh.admin_password else None,
        ssh.ssh_key_value.get_secret_value() if ssh.ssh_key_value else None,
    )


def cluster_attributes(stack: Stack, name: str, cluster: DeclaredCluster) -> dict:
    """The stack's cluster as the plan compares it: plain fields through stack/cluster_fields.py, the composite
    ones (SSH, subnet, identities, location's default, tags) here, all in the table's order."""
    secrets = cluster_secrets(cluster)
    net = cluster.network_settings
    identity = cluster.identity
    explicit = {
        "ssh_public_access_enabled": bool(cluster.ssh_public_access_enabled) if secrets.admin_username else None,
        "ssh_credentials_hash": ssh_credentials_hash(stack.stack, name, secrets),
        "subnet": subnet_id(stack.workspace, net.vnet_name if net else None, net.subnet if net else None),
        "user_assigned_identities": sorted(i.resource_id.lower() for i in (identity.user_assigned_identities or []))
        if identity else [],
        "location": normalise_location(cluster.location) or stack.workspace.location,
        "tags": dict(sorted(cluster.tags.items())),
    }
    return {f.attribute: normalised(f, path_value(cluster, f.stack)) if f.plain(DESIRED) else explicit[f.attribute]
            for f in CLUSTER_FIELDS if f.stack is not None}


def live_comparable(attributes: dict) -> dict:
    """The attributes Azure can report back (used for the drift hash): everything but tag-carried ones."""
    return {k: v for k, v in attributes.items() if k not in TAG_CARRIED}


def desired_clusters(stack: Stack) -> list[Resource]:
    out = []
    for name, cluster in stack.clusters.items():
        attrs = cluster_attributes(stack, name, cluster)
        address = f"cluster.{name}"
        digest = content_hash(live_comparable(attrs))   # of a secret's clear text: a secret itself (a fast hash)
        tags = {TAG_STACK: stack.stack, TAG_ADDRESS: address,
                TAG_HASH: Secret(digest) if contains_secret(attrs) else digest}
        if attrs["ssh_credentials_hash"]:
            tags[TAG_SECRETS] = attrs["ssh_credentials_hash"]
        if attrs["prevent_destroy"]:
            tags[TAG_PREVENT_DESTROY] = "true"
        out.append(Resource(address, "cluster", name, attrs, tags))
    return out


# ---- live: a compute as Azure answers it, in the shape of the stack's -----------------------------------------
# Irons out what Azure fills in or spells differently: size-name case, tier spelling, idle time units, a missing
# public-IP flag (Azure means true), subnet ids, identity ids, SSH access "NotSpecified", tags Azure adds. A
# cluster's provisioningState is kept only when it is not Succeeded (provisioning_state, provisioning_error,
# provisioning_since): a healthy cluster's attributes are exactly those the stack describes, and plan can see a
# failed, canceled, deleting or long-creating one for what it is.

# Where Azure's answer carries an AmlCompute's own settings (null while it is created: azure/compute_codec.py)
UNREPORTED_PREFIX = "properties.properties."


def _provisioning(values: dict[str, Any]) -> dict[str, Any]:
    """provisioning_* attributes of a cluster whose provisioningState is known and not Succeeded."""
    state = values.get("provisioning_state")
    state = getattr(state, "value", state)  # azure-ai-ml hands an enum
    if state is None or str(state).lower() == "succeeded":
        return {}
    state = str(state)
    state = state[:1].upper() + state[1:]
    error = values.get("provisioning_errors")
    if isinstance(error, list):  # the REST shape: [{"error": {"code", "message"}}]
        first = (error[0] or {}).get("error", {}) if error and isinstance(error[0], dict) else {}
        error = ": ".join(str(x) for x in (first.get("code"), first.get("message")) if x) or None
    since = values.get("created_on") if state.lower() in ("creating", "updating") else None
    return {"provisioning_state": state, "provisioning_error": str(error) if error else None,
            "provisioning_since": str(since) if since else None}


def without_provisioning(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k not in PROVISIONING_KEYS}


def cluster_resource(values: dict[str, Any]) -> Resource:
    """values: compute_values' (azure/compute_codec.py), keyed as stack/cluster_fields.py's `value_key`: plain fields
    are normalised through the table, the composite ones (SSH, our tags, provisioning) here, in the table's order;
    provisioning_errors is the first error's code, as azure-ai-ml keeps it, or the REST list."""
    user_tags, ours = split_tags(values.get("tags"))
    provisioning = _provisioning(values)
    explicit = {
        # without an admin user there is no SSH to open: Azure's resolved default is not a difference
        "ssh_public_access_enabled": bool(values.get("ssh_public_access_enabled"))
        if values.get("ssh_admin_username") else None,
        "ssh_credentials_hash": ours.get(TAG_SECRETS),
        "tags": user_tags,
        "prevent_destroy": ours.get(TAG_PREVENT_DESTROY) == "true",
        **provisioning,
    }
    attributes = {f.attribute: normalised(f, values.get(f.value_key)) if f.plain(LIVE) else explicit[f.attribute]
                  for f in CLUSTER_FIELDS if f.plain(LIVE) or f.attribute in explicit}
    if values.get("settings_reported") is False:  # still Creating, or its properties null: unknown, not defaults
        attributes.update({f.attribute: None for f in CLUSTER_FIELDS
                           if f.compared and any(r.startswith(UNREPORTED_PREFIX) for r in f.rest)})
    address = ours.get(TAG_ADDRESS) or f"cluster.{values['name']}"
    return Resource(address, "cluster", values["name"], attributes, ours)


def other_compute_resource(name: str, compute_type: str) -> Resource:
    """A compute of another kind than AmlCompute (AKS, a compute instance, ...) holding a cluster's name: never
    infra's to change or adopt, so it carries no attributes to compare, only what it is."""
    return Resource(f"cluster.{name}", "cluster", name, {"compute_type": compute_type}, {})


def is_other_compute(resource: Resource) -> bool:
    # a workspace's computes share one namespace, so another compute is read as this kind's live resource
    return resource.type == "cluster" and set(resource.attributes) == {"compute_type"}


def compute_resource(values: dict[str, Any]) -> Resource:
    """An AmlCompute cluster, normalised; a compute of another kind holding the name (a workspace's computes
    share one namespace: AKS, compute instances, ...) as what it is, which plan never adopts or changes."""
    compute_type = str(values.get("compute_type") or "")
    if compute_type.lower() != "amlcompute":
        return other_compute_resource(values["name"], compute_type.strip("* ") or "unknown")
    return cluster_resource(values)


def unreadable_diagnostics(values: dict[str, Any]) -> list[Diagnostic]:
    """One error per value of a compute whose shape the provider could not read (compute_values' `unreadable`),
    naming the compute and the field as Azure's answer spells it."""
    name = values.get("name")
    what, show = (f"cluster.{name}", NextStep(SHOW_COMPUTE, ("--name", name), LIST_INSTEAD)) \
        if isinstance(name, str) and name else ("a compute of the workspace", NextStep(LIST_COMPUTES, (), LIST_INSTEAD))
    return [Diagnostic(
        "error", "plan.live-unreadable",
        f"{what}: Azure answered {p['path'] or 'the compute'} as {p['value']}, which infra cannot read (it reads "
        f"{p['expected']} there); plan stops rather than compare a misreading, which could replace the cluster",
        hint=says("nothing was changed; see what Azure holds with ", show)) for p in values.get("unreadable") or []]


def live_clusters(computes: list[dict[str, Any]], clusters: set[str] | dict[str, Any]) -> dict[str, Resource]:
    """The workspace's computes by name. A compute the stack declares (`clusters`), or one whose name could not be
    read, that Azure answered in a shape infra cannot read stops the plan (DiagnosticError). Any other is only ever
    left alone, or deleted by its ownership tags (which, unread, make it not infra's), whatever its other fields
    say."""
    live, problems = {}, []
    for values in computes:
        name = values.get("name")
        if values.get("unreadable") and (name in clusters or not isinstance(name, str) or not name):
            problems += unreadable_diagnostics(values)
            continue
        res = compute_resource(values)
        live[res.name] = res
    if problems:
        raise DiagnosticError(problems)
    return live


def read_cluster(provider: Provider, name: str) -> Resource | None:
    """One compute, normalised; a shape infra cannot read is a DiagnosticError (import, apply), never a guess."""
    values = provider.read("cluster", name)
    if values is not None and values.get("unreadable"):
        raise DiagnosticError(unreadable_diagnostics({**values, "name": values.get("name") or name}))
    return None if values is None else compute_resource(values)


# ---- the diff -------------------------------------------------------------------------------------------------


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
    before = change.before or {}   # a replacement always has the live cluster it replaces
    live = ", ".join(f"{f} = {before.get(f)!r}" for f in fields)
    return source.diagnostic(
        import_at(imports, change.address), "import.forces-replacement",
        f"import of {change.address}: the stack declares it with another {', '.join(fields)} than the cluster "
        f"{imports[change.address]!r} has ({live}), which Azure cannot change in place: the apply would destroy "
        "the cluster it imports and create another",
        says(f"declare clusters.{change.name} as it is live (",
             NextStep(("infra", "plan"), (source.file, "--generate-config-out", "FILE")), " writes it), apply the "
             "import, then change it in a later plan (or, to recreate it on purpose, import it first and plan with "
             f"`--replace {change.address}`)"))


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
    graph_shape, sized, public_ip_needs_subnet = "box3d", True, True

    def declared(self, stack: Stack) -> dict[str, Any]:
        return stack.clusters

    def desired(self, loaded: LoadedStack) -> list[Resource]:
        return desired_clusters(loaded.stack)

    def read_live(self, provider: Provider, wanted: dict[str, str | None]) -> list[dict[str, Any]]:
        """Every compute of the workspace: one list call, whatever the stack's size."""
        return provider.list(self.name)

    def normalise(self, values: dict[str, Any]) -> Resource:
        return compute_resource(values)

    def live_resources(self, read: list[dict[str, Any]], wanted: dict[str, str | None]) -> dict[str, Resource]:
        return live_clusters(read, wanted)

    def held_by_other(self, current: Resource) -> bool:
        return is_other_compute(current)

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
        for name, current in sorted(self.live(live).items()):
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
            c.name, c.after, c.before or {}, source, f"would be replaced (--replace {c.address})",   # live: not a create
            f"leave out --replace {c.address}, or set clusters.{c.name}.lifecycle.prevent_destroy: false and "
            "apply that first")
        return [replace_change(c)], [protected] if protected else []

    def drift(self, desired: list[Resource], live: LiveState, stack: str) -> list[ResourceChange]:
        """Owned clusters whose live attributes no longer hash to what infra last wrote. infra's last write is
        known exactly when the stack still hashes to the same value (then `before` is the stack's attributes);
        otherwise `before` is unknown and only the fact of drift is reported."""
        by_name = {r.name: r for r in desired if r.type == self.name}
        out = []
        for name, current in sorted(self.live(live).items()):
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
        r = self.live(live).get(name)
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
