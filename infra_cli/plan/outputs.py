"""Output values read live: `infra output`, apply's closing `Outputs:`, and the plan's `Changes to Outputs:`
(a value whose resource the plan creates or replaces, or whose smoke will run, is `(known after apply)`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra_cli.plan.desired import desired_resources
from infra_cli.plan.live import LiveState, read_live
from infra_cli.plan.model import Action, ResourceChange
from infra_cli.plan.preflight import LIVE_JUDGED_RULES
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.outputs import UNKNOWN, Reference, evaluate
from infra_cli.state.records import SmokeRecord
from infra_cli.validate.engine import load_valid_stack

_ARM = ("/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.MachineLearningServices/workspaces/{w}"
        "/computes/{n}")


@dataclass(frozen=True)
class OutputValue:
    value: Any   # stack/outputs.py UNKNOWN when not known until apply; None when the resource does not exist
    sensitive: bool
    description: str | None = None

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN


def output_values(loaded: LoadedStack, live: LiveState, records: dict[str, SmokeRecord | None],
                  resolved: dict[str, str | None] | None = None, *, changes: list[ResourceChange] | None = None,
                  pending: Any = ()) -> dict[str, OutputValue]:
    """Each output's value from the live state; `changes` and `pending` (smoke.NAME) of a plan make the values
    they will change unknown."""
    stack = loaded.stack
    will_change = {c.address for c in changes or [] if c.action in (Action.CREATE, Action.REPLACE)}
    will_change |= {c.address for c in changes or [] if c.action is Action.UPDATE and c.type == "environment"}
    will_change |= set(pending)
    updated = {c.address: c.after for c in changes or [] if c.action is Action.UPDATE and c.type == "cluster"}
    ws = stack.workspace

    def lookup(ref: Reference) -> Any:
        if ref.address in will_change:
            return UNKNOWN
        if ref.type == "cluster":
            r = live.clusters.get(ref.name)
            if r is None or r.owner_stack != stack.stack:
                return None
            a = updated.get(ref.address) or r.attributes   # an update in place: the values it sets
            return {"id": _ARM.format(s=ws.subscription_id, g=ws.resource_group, w=ws.name, n=r.name),
                    "name": r.name, "size": a.get("size"), "max_instances": a.get("max_instances"),
                    "location": a.get("location"),
                    "provisioning_state": a.get("provisioning_state") or "Succeeded"}.get(ref.attribute)
        if ref.type == "environment":
            env = stack.environments.get(ref.name)
            if env is None:
                return None
            if env.curated:
                asset = (resolved or {}).get(ref.name) or env.curated   # a registry's: azureml://registries/...
                version = (asset.rsplit("/versions/", 1)[1] if "/versions/" in asset
                           else asset.rsplit(":", 1)[1] if asset.count(":") >= 2 and "@" not in asset else None)
            else:
                r = live.environments.get(ref.name)
                version = r.attributes.get("version") if r is not None else None
                if version is None:
                    return None
                asset = f"azureml:{ref.name}:{version}"
            return {"asset_id": asset, "name": ref.name, "version": version, "image": env.image}.get(ref.attribute)
        record = records.get(ref.name)
        if record is None:
            return None
        return {"verdict": record.result, "busbw_gbps": record.busbw_gbps, "job_name": record.job,
                "ran_at": record.at}.get(ref.attribute)

    return {name: OutputValue(evaluate(o.value, lookup), o.sensitive, o.description)
            for name, o in stack.outputs.items()}


def live_outputs(loaded: LoadedStack, provider: Any) -> dict[str, OutputValue]:
    """The outputs now, read from Azure through `provider`."""
    stack = loaded.stack
    curated = {name: env.curated for name, env in stack.environments.items() if env.curated}
    read = read_live(provider, desired_resources(loaded), curated=curated, stack=stack.stack,
                     distributions=list(stack.distributions))
    return output_values(loaded, read.state, read.records, read.resolved)


def read_outputs(stack_path: Path, *, backend: Callable[[Any], Any]) -> tuple[LoadedStack, dict[str, OutputValue]]:
    """`infra output`: load the stack, read Azure through the provider `backend` builds, evaluate its outputs."""
    loaded, _ = load_valid_stack(stack_path, judged_live=LIVE_JUDGED_RULES)
    if not loaded.stack.outputs:
        return loaded, {}
    return loaded, live_outputs(loaded, backend(loaded.stack.workspace))
