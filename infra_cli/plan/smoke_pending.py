"""Smoke results count in the plan (Terraform's "tainted"): which distributions must run their smoke job.

A distribution's smoke inputs are the hashes of its cluster (the attributes that force a replacement, as the
stack asks for them), its environment (the content hash, or for a curated reference the version it resolves to
now) and its own settings. Each smoke run leaves a record on Azure (state/records.py: an environment version per
record, readable through the SDK, never a local file): the result and the inputs it ran with. Apply writes a
"pending" record for the distributions whose cluster or environment it changes, so a recreated cluster with the
same settings still counts as changed. Pure: no I/O here.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from infra_cli.knowledge.update_semantics import semantics
from infra_cli.plan.model import DELETE, NO_OP, UPDATE, Resource, ResourceChange, content_hash, secret_digest
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.secret import SHOWN, sealed
from infra_cli.state.records import FAILED, INCOMPLETE, PASSED, PENDING, SmokeInputs, SmokeRecord

NEVER_RAN = "never ran"
LAST_FAILED = "last smoke failed"
LAST_INCOMPLETE = "last smoke incomplete"


def smoke_inputs(loaded: LoadedStack, desired: list[Resource],
                 resolved: Callable[[str], str | None]) -> dict[str, SmokeInputs]:
    """distribution -> its smoke inputs. `resolved(environment name)`: a curated environment's resolved id
    (registry, name, version), None when unknown; other environments count by their content hash."""
    by_address = {r.address: r for r in desired}
    out = {}
    for name, dist in loaded.stack.distributions.items():
        cluster = by_address.get(f"cluster.{dist.cluster}")
        env = by_address.get(f"environment.{dist.environment}")
        env_key = None
        if env is not None:
            env_key = (resolved(env.name) or env.attributes.get("curated")) if env.attributes.get("kind") == "curated" \
                else env.attributes.get("content_hash")
        out[name] = SmokeInputs(_cluster_key(cluster) if cluster else "", content_hash(env_key),
                                content_hash(_distribution_settings(loaded, name)))
    return out


def _cluster_key(cluster: Resource) -> str:
    """What of a cluster a smoke proves: the attributes that force a replacement (size, tier, network, ...;
    validators/update_semantics.yaml, where an unclassified attribute counts too). Its scale settings, tags and
    description change in place on the same nodes, so a passing smoke still holds after them."""
    forcing = semantics("cluster").force_replacement   # a smoke runs on a cluster: this is that kind's own
    return content_hash({k: v for k, v in sorted(cluster.attributes.items()) if k in forcing})


def _distribution_settings(loaded: LoadedStack, name: str) -> dict:
    """The distribution's settings as its record's hash sees them. The hash is stored on Azure, so values from
    ${VAR} (secrets, as Terraform's `sensitive`) enter only through secret_digest, never a fast hash."""
    secrets: list[str] = []

    def taken_out(clear: Any) -> str:   # each Secret enters the digest below; its place holds the redacted form
        secrets.append(str(clear))
        return SHOWN

    dumped = loaded.stack.distributions[name].model_dump()
    if dumped.get("compute") is None:
        del dumped["compute"]   # added by issue 41: absent where unset, so the hashes recorded before still hold
    settings = json.loads(json.dumps(sealed(dumped, taken_out), default=str))
    for path in sorted(loaded.source.interpolated, key=repr):
        if tuple(path[:2]) != ("distributions", name) or len(path) < 3:
            continue
        holder = settings
        for key in path[2:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and isinstance(holder.get(path[-1]), str):
            secrets.append(holder[path[-1]])
            holder[path[-1]] = "(sensitive value)"
    if secrets:
        settings["sensitive_digest"] = secret_digest(f"infra-smoke/{loaded.stack.stack}/{name}", secrets)
    return settings


def changed_smokes(changes: list[ResourceChange], dependencies: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """smoke.DIST -> why, for every distribution whose cluster or environment the plan creates or replaces (a new
    environment version is a create). An update in place (a cluster's scale settings, tags, description) keeps
    what the last smoke proved: rerunning it would only cost node-hours."""
    changed = {c.address for c in changes if c.is_change and c.actions not in (DELETE, UPDATE, NO_OP)}
    out = {}
    for job, deps in sorted(dependencies.items()):
        kinds = [d.split(".", 1)[0] for d in deps if d in changed]
        if kinds:
            out[job] = " and ".join(f"{k} changed" for k in kinds)
    return out


def pending_smokes(inputs: dict[str, SmokeInputs], records: dict[str, SmokeRecord | None],
                   enabled: set[str]) -> dict[str, str]:
    """smoke.DIST -> why it must run, for each smoke-enabled distribution whose last recorded smoke did not
    pass with the inputs it has now."""
    out = {}
    for name, now in sorted(inputs.items()):
        if name not in enabled:
            continue
        record = records.get(name)
        if record is None:
            out[f"smoke.{name}"] = NEVER_RAN
        elif record.result == FAILED:
            out[f"smoke.{name}"] = LAST_FAILED + (f": job {record.job}" if record.job else "")
        elif record.result == INCOMPLETE:
            # pending until it passes, so -detailed-exitcode says 2 each time: the line names the way out (apply
            # and `infra smoke` name the package; plan holds only the record's reason)
            out[f"smoke.{name}"] = (LAST_INCOMPLETE + (f": {record.reason}" if record.reason else "") +
                                    f"; install what it lacks where its job runs, or set `smoke: {{enabled: false}}` "
                                    f"on distributions.{name} to plan without it")
        elif record.result == PENDING:
            out[f"smoke.{name}"] = f"{record.reason}, never ran since" if record.reason else NEVER_RAN
        elif record.result != PASSED or record.inputs is None:
            out[f"smoke.{name}"] = NEVER_RAN
        else:
            changed = now.changed_since(record.inputs)
            if changed:
                out[f"smoke.{name}"] = " and ".join(f"{k} changed" for k in changed) + " since the last passing smoke"
    return out
