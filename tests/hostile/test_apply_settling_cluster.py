"""A cluster another apply left half-created finishes provisioning between `infra apply`'s plan and its lock.

Found by the SIGKILL test of tests/test_lifecycle_local.py failing now and then with apply.stale-plan: the
killed apply's cluster went from Creating to Succeeded while the next apply waited for its lock, so the live
fingerprint differed although the plan would do exactly the same. Apply of a fresh plan now plans again under
the lock and goes on when the changes are the same; a saved plan file stays held to its fingerprint (stale
otherwise), as the contract says.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, start_emulator
from infra_cli.apply.engine import StalePlan, apply_outcome
from infra_cli.commands.backend import build_clients
from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.engine import PlanOutcome, plan_stack
from infra_cli.plan.kinds.cluster import read_cluster
from infra_cli.plan.model import NO_OP
from infra_cli.stack.load import load_stack

STACK = f"""
stack: settle
workspace: {{subscription_id: {TEST_SUBSCRIPTION}, resource_group: {TEST_RESOURCE_GROUP}, name: {TEST_WORKSPACE},
             location: {TEST_LOCATION}}}
clusters:
  first: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}
  second: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}
"""


def _plan_while_first_is_creating(tmp_path: Path):
    # long enough that the plan below still reads `first` Creating on a loaded machine (at 1.5 s the newest-versions
    # run once read it Succeeded: the saved plan then matched and no StalePlan came)
    server = start_emulator(tmp_path / "state", provisioning_delay_s=4)
    path = tmp_path / "stack.yaml"
    path.write_text(STACK, encoding="utf-8")
    clients = build_clients(load_stack(path).stack.workspace, local=True, emulator=server)
    loaded = load_stack(path)
    provider = AzureProvider(clients)
    # an earlier apply started `first` and died: it is Creating, with the stack's own values and tags
    from infra_cli.plan.desired import desired_resources
    from infra_cli.plan.kinds.cluster import cluster_secrets

    want = {r.address: r for r in desired_resources(loaded)}["cluster.first"]
    import threading

    started = threading.Thread(target=provider.put_cluster,
                               args=(want, cluster_secrets(loaded.stack.clusters["first"]), None, None))
    started.start()
    deadline = time.monotonic() + 20
    while (live := read_cluster(provider, "first")) is None or live.attributes.get("provisioning_state") != "Creating":
        assert time.monotonic() < deadline, "the emulator never showed the cluster Creating"
        time.sleep(0.05)
    outcome = plan_stack(loaded, provider)
    by_address = {c.address: c for c in outcome.plan.resource_changes}
    assert by_address["cluster.first"].actions == NO_OP and by_address["cluster.second"].actions == ["create"]
    assert outcome.live.of("cluster")["first"].attributes.get("provisioning_state") == "Creating", "the plan saw it settle"
    started.join()   # `first` has now finished provisioning: the live state differs from what the plan saw
    assert "provisioning_state" not in read_cluster(provider, "first").attributes   # kept only when not Succeeded
    return server, outcome


def test_apply_goes_on_when_a_settling_cluster_changes_nothing_it_would_do(tmp_path):
    server, outcome = _plan_while_first_is_creating(tmp_path)
    try:
        result = apply_outcome(outcome)
        assert result.ok and result.added == 1
    finally:
        server.stop()


def test_a_saved_plan_stays_held_to_its_fingerprint(tmp_path):
    server, outcome = _plan_while_first_is_creating(tmp_path)
    try:
        saved = PlanOutcome(outcome.plan, outcome.loaded, outcome.provider, live=None)   # as from a plan file
        with pytest.raises(StalePlan):
            apply_outcome(saved)
    finally:
        server.stop()
