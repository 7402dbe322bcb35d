"""How apply makes a cluster's change: one full PUT (create, update in place, adopt); a replace deletes, waits
until the name is gone, creates and checks the size it reports (the same-name race brings a cluster back with its
OLD size); a retry first waits for the cluster to settle, then deletes what is unusable (Failed, or differing in a
field no PUT can change) and puts the stack's settings again."""

from __future__ import annotations

import time

from infra_cli.apply.kinds.base import Applying, KindSteps, Say
from infra_cli.knowledge.update_semantics import semantics
from infra_cli.plan.api import (DELETE, NO_OP, REPLACE, Resource, ResourceChange, cluster_secrets, provisioning_problem,
                                read_cluster, settings_unreported)

_BUSY_STATES = ("Creating", "Updating", "Deleting")


class SizeMismatch(RuntimeError):
    code = "SizeMismatchAfterReplace"


def _put_cluster(run: Applying, change: ResourceChange, desired: Resource) -> None:
    cluster = run.loaded.stack.clusters[change.name]
    net = cluster.network_settings
    run.provider.put_cluster(desired, cluster_secrets(cluster), net.subnet if net else None,
                             net.vnet_name if net else None)
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
            run.provider.delete_cluster(change.name)
            return
        assert desired is not None   # every change but a delete has the stack's declaration
        # a cluster whose settings Azure has not reported (still Creating, Deleting): wait for it, then judge it
        if first and not (change.before is not None and settings_unreported(change.before)):
            if change.actions == REPLACE:
                say("progress", "destroying (replace, step 1 of 2)")
                run.provider.delete_cluster(change.name)
            say("progress", "creating (replace, step 2 of 2)" if change.actions == REPLACE else change.action.verb)
        else:
            live = _settled(run, change.name)
            if live is not None and _unusable(live, desired):
                say("progress", f"destroying what is there ({provisioning_problem(live.attributes) or 'replace'})")
                run.provider.delete_cluster(change.name)
                live = None
            say("progress", "creating" if live is None else "putting the cluster again")
        _put_cluster(run, change, desired)

    def adopt(self, run: Applying, change: ResourceChange, desired: Resource, say: Say) -> None:
        """Adopted as it is: the same PUT with the tags added; one that changes gets them with its change."""
        if change.actions == NO_OP:
            say("progress", f"importing {change.importing} (adding this stack's ownership tags)")
            _put_cluster(run, change, desired)


CLUSTER_STEPS = ClusterSteps()
