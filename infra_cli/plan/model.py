"""The plan's data: resources (desired or live, normalised), changes, the plan itself.

Shaped after Terraform's plan model: a change is an address, actions, before, after, the attribute paths
that force replacement, and why. Everything here is plain data that serialises to the plan JSON
(`infra plan --json`, the shape of `terraform show -json`; see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, overload

from infra_cli.conventions import TAG_STACK
from infra_cli.diagnostics import Diagnostic
from infra_cli.plan.cost import costs_json
from infra_cli.stack.secret import Secret, revealed, wrap
from infra_cli.state.serial import StateSerial

FORMAT_VERSION = "1.0"



class Action(Enum):
    """What a change does, with every word the plan and apply show for it (Terraform's plans.Action).
    Value: (JSON form, symbol, ANSI colour, legend words, verb while it runs, past tense)."""

    NO_OP = (("no-op",), "", "0", "no-op", "reading", "unchanged")
    CREATE = (("create",), "+", "32", "create", "creating", "created")
    UPDATE = (("update",), "~", "33", "update in-place", "updating in place", "updated")
    REPLACE = (("delete", "create"), "-/+", "31", "destroy and then create replacement", "replacing", "replaced")
    DELETE = (("delete",), "-", "31", "destroy", "destroying", "destroyed")

    @property
    def json(self) -> list[str]:
        """The form of `terraform show -json`: ["create"], ["delete", "create"], ..."""
        return list(self.value[0])

    # methods, not property(lambda ...) assignments: in an Enum's body those read to mypy as more members
    @property
    def symbol(self) -> str:
        return self.value[1]

    @property
    def colour(self) -> str:
        return self.value[2]

    @property
    def legend(self) -> str:
        return self.value[3]

    @property
    def verb(self) -> str:
        return self.value[4]

    @property
    def past(self) -> str:
        return self.value[5]

    @classmethod
    def of(cls, actions: list[str] | tuple[str, ...]) -> "Action":
        """The action a JSON action list names (a plan file's); an unknown list is a ValueError."""
        for action in cls:
            if tuple(actions) == action.value[0]:
                return action
        raise ValueError(f"unknown plan actions {list(actions)!r}")


# The JSON action lists a ResourceChange carries (its `actions`, as plan JSON and plan files write them).
NO_OP, CREATE, UPDATE, DELETE, REPLACE = (a.json for a in (Action.NO_OP, Action.CREATE, Action.UPDATE,
                                                           Action.DELETE, Action.REPLACE))


class PlanMode(str, Enum):
    """Terraform's plan modes: converge, destroy everything owned, or only report drift."""

    NORMAL = "normal"
    DESTROY = "destroy"
    REFRESH_ONLY = "refresh-only"

    def __str__(self) -> str:
        return self.value


def canonical_json(value: Any) -> str:
    """Secrets (stack/secret.py) as their redacted form: compare sealed or revealed values, never these."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def content_hash(value: Any) -> str:
    """What tells a resource's content from another's: compared with the same hash of what Azure reads back (plain
    text), so it is taken of secrets' clear values; a hash of a secret is a Secret itself (plan/kinds/)."""
    return hashlib.sha256(canonical_json(revealed(value)).encode()).hexdigest()[:16]


def secret_digest(salt: str, secrets: list[str]) -> str:
    """A digest of secret values that may be stored (a tag, a plan file) yet tells a change: scrypt
    (memory-hard, ~30 ms a guess) rather than a fast hash a weak secret could be guessed from offline."""
    secret = b"\0".join(value.encode() for value in secrets)
    return hashlib.scrypt(secret, salt=salt.encode(), n=2**14, r=8, p=1, maxmem=64 * 1024 * 1024, dklen=16).hex()


@dataclass(frozen=True)
class Resource:
    """One resource, desired or live, with comparable (normalised, secret-free) attributes."""

    address: str  # "cluster.a100", "environment.acpt"
    type: str  # "cluster" | "environment"
    name: str  # the Azure name
    attributes: dict[str, Any]
    tags: dict[str, str] = field(default_factory=dict)  # ownership tags only (user tags are an attribute)
    depends_on: tuple[str, ...] = ()

    @property
    def owner_stack(self) -> str | None:
        return self.tags.get(TAG_STACK)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Resource":
        return cls(data["address"], data["type"], data["name"], data["attributes"], data.get("tags") or {},
                   tuple(data.get("depends_on") or ()))


@dataclass
class LiveState:
    """Normalised live resources by kind (plan/kinds/ KINDS' names: "cluster", "environment"), then by Azure name:
    each kind reads and fills its own entry (Kind.live), so a new kind needs no field here. An environment's
    attributes describe one live version (the pinned one, or the latest) plus `next_version`. Its fingerprint is
    plan/live.py live_fingerprint, taken over every kind of KINDS, which this module cannot name."""

    resources: dict[str, dict[str, Resource]] = field(default_factory=dict)

    def of(self, kind: str) -> dict[str, Resource]:
        """The live resources of `kind` (a Resource.type), by Azure name: an empty map, kept, where none is read."""
        return self.resources.setdefault(kind, {})


def fingerprint_of(sections: dict[str, dict[str, Resource]]) -> str:
    """What tells one live state from another (a plan records it; apply compares), over each kind's resources by
    the kind's stack section ("clusters", the key plan files have always recorded it under). The live attributes
    hold secrets in clear (a description from a sensitive variable), and plan JSON and plan files show the
    fingerprint, so it is scrypt (memory-hard, ~30 ms a guess), never a fast hash a short secret is found from."""
    return secret_digest("infra-live-fingerprint", [canonical_json(revealed({
        section: {n: [r.attributes, r.tags] for n, r in sorted(resources.items())}
        for section, resources in sections.items()}))])


# Attributes derived from secrets: compared and stored (hardened, in tags and 0600 plan files), never shown.
SENSITIVE_ATTRIBUTES = frozenset({"ssh_credentials_hash"})
SENSITIVE_MARK = "(sensitive value)"


@overload
def masked(attributes: dict, sensitive: tuple = ()) -> dict: ...
@overload
def masked(attributes: dict | None, sensitive: tuple = ()) -> dict | None: ...
def masked(attributes: dict | None, sensitive: tuple = ()) -> dict | None:
    """Attributes as shown: secrets' hashes, and values the stack interpolated from ${VAR} (`sensitive`:
    attribute keys, or (key, map key) pairs such as ("tags", "owner")), read "(sensitive value)"."""
    if attributes is None:
        return None
    whole = SENSITIVE_ATTRIBUTES | {s[0] for s in sensitive if len(s) == 1}
    parts: dict[str, set] = {}
    for s in sensitive:
        if len(s) == 2:
            parts.setdefault(s[0], set()).add(s[1])
    out = {}
    for k, v in attributes.items():
        if k in whole and v is not None:
            v = SENSITIVE_MARK
        elif k in parts and isinstance(v, dict):
            v = {mk: (SENSITIVE_MARK if mk in parts[k] else mv) for mk, mv in v.items()}
        out[k] = v
    return out


# What a saved plan's reader needs as it was written (show prices a cluster from them): kept as the stack wrote it
# even where it came from a secret, which the stack language has no reason to put there.
READABLE_IN_PLAN_FILES = frozenset({"size", "tier", "location", "max_instances", "version"})


def with_secret_paths(attributes: dict | None, sensitive: tuple) -> dict | None:
    """`attributes` with the text at each of `sensitive`'s paths (an attribute key, or (key, map key)) a Secret:
    what the loader marked sensitive but a field keeps as plain text (a registry inside a curated reference, a
    subnet from ${ENV}), so that the plan file keeps it as it keeps every secret (a keyed digest)."""
    if attributes is None:
        return None
    out = dict(attributes)
    for path in sensitive:
        key = path[0]
        if key in READABLE_IN_PLAN_FILES:
            continue
        if len(path) == 1 and isinstance(out.get(key), (str, dict, list)):   # a whole build: each text in it
            out[key] = wrap(out[key])
        elif len(path) == 2 and isinstance(out.get(key), dict) and isinstance(out[key].get(path[1]), str):
            out[key] = {**out[key], path[1]: Secret(out[key][path[1]])}
    return out


@dataclass(frozen=True)
class ResourceChange:
    address: str
    type: str
    name: str
    actions: list[str]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    replace_paths: list[list[str]] = field(default_factory=list)
    action_reason: str | None = None
    sensitive: tuple = ()  # attribute paths whose value came from ${VAR}: compared as they are, shown masked
    importing: str | None = None  # an import block adopts it: its Azure name (Terraform's change.importing.id)

    @property
    def action(self) -> Action:
        return Action.of(self.actions)

    @property
    def is_change(self) -> bool:
        return self.actions != NO_OP or self.importing is not None

    def changed_paths(self) -> list[str]:
        before, after = self.before or {}, self.after or {}
        return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))

    def to_json(self, *, mask_sensitive: bool = True) -> dict:
        """`mask_sensitive=False` (plan files): the sensitive paths' values as Secrets, which the plan file seals."""
        def show(attributes: dict | None) -> dict | None:
            return masked(attributes, self.sensitive) if mask_sensitive else with_secret_paths(attributes,
                                                                                               self.sensitive)

        out: dict[str, Any] = {
            "address": self.address, "type": self.type, "name": self.name,
            "change": {"actions": list(self.actions), "before": show(self.before), "after": show(self.after)},
            "replace_paths": self.replace_paths, "action_reason": self.action_reason,
        }
        if self.importing is not None:
            out["change"]["importing"] = {"id": self.importing}
        if self.sensitive:  # a saved plan keeps them, so `infra show PLANFILE` masks the same values
            out["sensitive_paths"] = [list(p) for p in self.sensitive]
        return out

    @classmethod
    def from_json(cls, data: dict) -> "ResourceChange":
        ch = data["change"]
        return cls(data["address"], data["type"], data["name"], list(ch["actions"]), ch.get("before"),
                   ch.get("after"), [list(p) for p in data.get("replace_paths") or []], data.get("action_reason"),
                   tuple(tuple(p) for p in data.get("sensitive_paths") or ()),
                   ((ch.get("importing") or {}).get("id") if isinstance(ch.get("importing"), dict) else None))


# What a plan is bound to in space: the workspace it read and would write (a saved plan applies there only).
WORKSPACE_IDENTITY = ("cloud", "subscription_id", "resource_group", "name")


def workspace_identity(workspace: Any) -> dict[str, str]:
    """The stack's workspace as a plan records it: cloud, subscription, resource group, workspace name."""
    return {k: str(getattr(workspace, k)) for k in WORKSPACE_IDENTITY}


def same_workspace(a: dict[str, str], b: dict[str, str]) -> bool:
    """Whether two identities name one workspace: Azure's ids and names compare without case, as ARM does."""
    return all(str(a.get(k, "")).lower() == str(b.get(k, "")).lower() for k in WORKSPACE_IDENTITY)


def describe_workspace(identity: dict[str, str]) -> str:
    return (f"workspace {identity.get('name')!r} (resource group {identity.get('resource_group')!r}, subscription "
            f"{identity.get('subscription_id')}, {identity.get('cloud')})")


@dataclass
class Plan:
    stack: str
    mode: PlanMode
    resource_changes: list[ResourceChange]
    smoke_jobs: list[str]
    diagnostics: list[Diagnostic]   # as the stages said them: turned into JSON only by to_json
    live_fingerprint: str
    desired: list[Resource] = field(default_factory=list)
    drift: list[ResourceChange] = field(default_factory=list)
    smoke_reasons: dict[str, str] = field(default_factory=dict)  # smoke.DIST -> why it will run
    # where and when: the workspace's identity (workspace_identity) and the stack's lineage and serial it read
    workspace: dict[str, str] = field(default_factory=dict)
    state: StateSerial = field(default_factory=StateSerial)
    format_version: str = FORMAT_VERSION
    configuration: dict = field(default_factory=dict)   # the stack as declared, redacted (plan/configuration.py)

    @property
    def changes(self) -> list[ResourceChange]:
        return [c for c in self.resource_changes if c.is_change]

    def __post_init__(self):
        self.mode = PlanMode(self.mode)   # a plan file's string, or a member

    def counts(self) -> tuple[int, int, int]:
        actions = [c.action for c in self.resource_changes]
        add = sum(a in (Action.CREATE, Action.REPLACE) for a in actions)
        change = sum(a is Action.UPDATE for a in actions)
        destroy = sum(a in (Action.DELETE, Action.REPLACE) for a in actions)
        return add, change, destroy

    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    def to_json(self, *, mask_sensitive: bool = True) -> dict:
        """`mask_sensitive=False` only for plan files, whose apply compares the real (hardened) values."""
        return {
            "format_version": self.format_version,
            "stack": self.stack,
            "mode": self.mode.value,
            "resource_changes": [c.to_json(mask_sensitive=mask_sensitive) for c in self.resource_changes],
            "resource_drift": [c.to_json(mask_sensitive=mask_sensitive) for c in self.drift],
            "smoke_jobs": list(self.smoke_jobs),
            "smoke_reasons": {job: self.smoke_reasons.get(job) for job in self.smoke_jobs},
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "live_fingerprint": self.live_fingerprint,
            "workspace": dict(self.workspace),
            "state": self.state.to_json(),
            "costs": costs_json(self.resource_changes),
            "configuration": self.configuration,
        }
