"""How apply makes a cluster's change: one full PUT (create, update in place, adopt); a replace deletes, waits
until the name is gone, creates and checks the size it reports (the same-name race brings a cluster back with its
OLD size); a retry first waits for the cluster to settle, then deletes what is unusable (Failed, or differing in a
field no PUT can change) and puts the stack's settings again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from infra_cli.arguments import NextStep
from infra_cli.apply.kinds.base import Applying, KindSteps, Say, import_error, secrets_for_put, unowned
from infra_cli.azure.protocol import Provider
from infra_cli.conventions import TAG_ADDRESS, TAG_HASH, TAG_PREVENT_DESTROY, TAG_STACK
from infra_cli.diagnostics import Diagnostic, DiagnosticError, LIST_COMPUTES, LIST_INSTEAD, says
from infra_cli.knowledge.update_semantics import semantics
from infra_cli.plan.api import (DELETE, NO_OP, REPLACE, LiveState, Plan, Resource, ResourceChange, cluster_secrets,
                                content_hash, is_other_compute, live_comparable, provisioning_problem, read_cluster,
                                settings_unreported)

_BUSY_STATES = ("Creating", "Updating", "Deleting")


class SizeMismatch(RuntimeError):
    code = "SizeMismatchAfterReplace"


def _put_cluster(run: Applying, change: ResourceChange, desired: Resource) -> None:
    cluster = run.loaded.stack.clusters[change.name]
    net = cluster.network_settings
    run.provider.write(desired.type, desired, secrets=cluster_secrets(cluster), subnet=net.subnet if net else None,
                       vnet_name=net.vnet_name if net else None)
    if change.actions == REPLACE:
        live = read_cluster(run.provider, change.name)
        want = desired.attributes["size"]
        if live is None or live.attributes["size"].lower() != want.lower():
            raise SizeMismatch(f"after the replace, {change.address} reports size "
                               f"{live.attributes['size'] if live else '(gone)'} instead of {want}")


def _settled(run: Applying, name: str) -> Resource | None:
    """The cluster once no operation runs on it (None if absent); bounded by settle_timeout_s."""
    deadline = time.monotonic() + run.settle_timeout_s
    while True:
        live = read_cluster(run.provider, name)
        if live is None or live.attributes.get("provisioning_state") not in _BUSY_STATES:
            return live
        if time.monotonic() > deadline:
            raise TimeoutError(f"cluster {name} is still {live.attributes['provisioning_state']} after "
                               f"{run.settle_timeout_s:.0f}s")
        time.sleep(run.poll_s)


def _unusable(live: Resource, desired: Resource) -> bool:
    """Failed (or the like), or differing in a field no PUT can change: only delete + create helps."""
    forcing = semantics("cluster").force_replacement
    if settings_unreported(live.attributes):  # nothing reported to compare: the PUT says what it should be
        return bool(provisioning_problem(live.attributes))
    return bool(provisioning_problem(live.attributes)) or any(
        live.attributes.get(k) != desired.attributes.get(k) for k in desired.attributes if k in forcing)


class ClusterSteps(KindSteps):
    def step(self, run: Applying, change: ResourceChange, desired: Resource | None, say: Say, *, first: bool) -> None:
        if change.actions == DELETE:
            say("progress", "destroying")
            run.provider.delete(change.type, change.name)
            return
        assert desired is not None   # every change but a delete has the stack's declaration
        # a cluster whose settings Azure has not reported (still Creating, Deleting): wait for it, then judge it
        if first and not (change.before is not None and settings_unreported(change.before)):
            if change.actions == REPLACE:
                say("progress", "destroying (replace, step 1 of 2)")
                run.provider.delete(change.type, change.name)
            say("progress", "creating (replace, step 2 of 2)" if change.actions == REPLACE else change.action.verb)
        else:
            live = _settled(run, change.name)
            if live is not None and _unusable(live, desired):
                say("progress", f"destroying what is there ({provisioning_problem(live.attributes) or 'replace'})")
                run.provider.delete(change.type, change.name)
                live = None
            say("progress", "creating" if live is None else "putting the cluster again")
        _put_cluster(run, change, desired)

    def adopt(self, run: Applying, change: ResourceChange, desired: Resource, say: Say) -> None:
        """Adopted as it is: the same PUT with the tags added; one that changes gets them with its change."""
        if change.actions == NO_OP:
            say("progress", f"importing {change.importing} (adding this stack's ownership tags)")
            _put_cluster(run, change, desired)


    def destroy_refusal(self, change: ResourceChange, plan: Plan, live: LiveState, verb: str, file: str, hint: str
                        ) -> Diagnostic | None:
        """The cluster exists, carries this stack's ownership tag, and neither the stack (plan.desired) nor its live
        tag (the last apply) sets lifecycle.prevent_destroy."""
        current = live.of(change.type).get(change.name)
        in_stack = any(r.type == "cluster" and r.name == change.name and r.attributes.get("prevent_destroy")
                       for r in plan.desired)
        if current is None:
            return Diagnostic("error", "apply.stale-plan", f"{change.address}: the plan would {verb} "
                              f"cluster {change.name!r}, which does not exist", file, None, None, hint)
        if is_other_compute(current) or current.owner_stack != plan.stack:
            owner = "no" if current.owner_stack is None else f"stack {current.owner_stack!r}'s"
            return Diagnostic(
                "error", "apply.not-owned", f"{change.address}: the plan would {verb} cluster {change.name!r}, which "
                f"carries {owner} ownership tag ({TAG_STACK}), not stack {plan.stack!r}'s: infra destroys only what "
                "its stack owns", file, None, None, says("leave it alone, or adopt it first with ", NextStep(("infra", "import"))))
        if in_stack or current.attributes.get("prevent_destroy"):
            where = "the stack sets" if in_stack else "it was applied with"
            return Diagnostic(
                "error", "apply.prevent-destroy", f"{change.address}: the plan would {verb} cluster {change.name!r}, "
                f"but {where} lifecycle.prevent_destroy", file, None, None,
                f"set clusters.{change.name}.lifecycle.prevent_destroy: false and apply that first")
        return None

    def importable(self, loaded: Any, address: str, name: str, provider: Provider) -> Any:
        """The live AmlCompute cluster, or the reason it cannot be imported."""
        live = read_cluster(provider, name)
        if live is None:
            raise import_error(loaded, f"there is no cluster {name!r} in workspace {loaded.stack.workspace.name!r}",
                               says("check the name with ", NextStep(LIST_COMPUTES, local_instead=LIST_INSTEAD)))
        if is_other_compute(live):
            raise import_error(loaded, f"{name!r} is a {live.attributes['compute_type']} compute, not an AmlCompute "
                               "cluster",
                               "infra imports AmlCompute clusters only: give the stack's cluster another name")
        return unowned(loaded, address, live, f"cluster {name!r}")

    def adopt_imported(self, loaded: Any, address: str, name: str, provider: Provider, live: Any) -> str:
        """The same PUT with the same values plus this stack's tags (Azure never returns secrets: only the stack's
        own are sent). Protection is the stack's and survives adoption: a cluster the stack declares with
        lifecycle.prevent_destroy (or that still carries the tag) is protected again before import returns, so an
        apply that then drops it from the stack is refused as it was before `state rm`."""
        secrets, secrets_tag = secrets_for_put(loaded, name, live)
        tags = {TAG_STACK: loaded.stack.stack, TAG_ADDRESS: address,
                TAG_HASH: content_hash(live_comparable(live.attributes)),
                **secrets_tag}
        protected = loaded.stack.clusters[name].lifecycle.prevent_destroy or live.attributes.get("prevent_destroy")
        if protected:
            tags[TAG_PREVENT_DESTROY] = "true"
        provider.write(live.type, Resource(address, live.type, name, live.attributes, tags), secrets=secrets,
                       subnet=live.attributes["subnet"])
        return f"Imported {name} as {address}" + (", protected by lifecycle.prevent_destroy." if protected else ".")

    def forget(self, loaded: Any, address: str, name: str, provider: Provider, bump_serial: Callable[[], Any],
               error: Callable[[str, str], DiagnosticError]) -> str:
        stack, file = loaded.stack.stack, loaded.file
        live = read_cluster(provider, name)
        if live is None or live.owner_stack != stack or is_other_compute(live):
            raise error(f"stack {stack!r} owns no {address}", says(NextStep(("infra", "state", "list"), (file,)),
                                                                   " lists what it owns"))
        bump_serial()
        # the same PUT with the same values, without infra's tags (Azure never returns secrets: none are sent)
        provider.write(live.type, Resource(address, live.type, name, live.attributes, {}),
                       secrets=secrets_for_put(loaded, name, live)[0], subnet=live.attributes["subnet"])
        return f"Removed {address} from stack {stack!r}: cluster {name} is left as it is, no longer managed."

    def after_import(self, stack_path: Path) -> str:
        return says(" Run ", NextStep(("infra", "plan"), (str(stack_path),)), " to see how it differs from the stack.")


CLUSTER_STEPS = ClusterSteps()
