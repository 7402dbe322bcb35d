"""A killed apply's cluster create must not bring back a cluster destroyed after it.

Before: `infra apply` killed 5 s into a 20 s create (INFRA_EMULATOR_PROVISIONING_DELAY=20), then `infra destroy`
(its own in-process emulator, the default delay): "1 destroyed", and when the create's time came the emulator
wrote the cluster back. Azure cancels the create of a resource deleted under it; the emulator now does too (the
create's operation ends Canceled and writes nothing)."""

from __future__ import annotations

import time

from azure.ai.ml.entities import AmlCompute
from azure.core.exceptions import ResourceNotFoundError

import pytest

from emulator_fixtures import start_emulator


def test_a_delete_cancels_the_create_still_running_and_nothing_comes_back(tmp_path, test_workspace):
    from infra_cli.commands.backend import build_clients

    state = tmp_path / "local"
    create_s = 2.0
    # the killed apply: its emulator (a slow create) starts the create, and the process is gone before it ends
    with start_emulator(state, provisioning_delay_s=create_s) as slow:
        ml = build_clients(test_workspace, local=True, emulator=slow).ml
        ml.compute.begin_create_or_update(AmlCompute(name="gpu", size="Standard_ND96asr_v4", max_instances=2))
        started = time.monotonic()
        assert ml.compute.get("gpu").provisioning_state == "Creating"
    # the destroy: another process over the same state, whose deletes are quick
    with start_emulator(state, provisioning_delay_s=0.1) as quick:
        ml = build_clients(test_workspace, local=True, emulator=quick).ml
        ml.compute.begin_delete("gpu").result()
        with pytest.raises(ResourceNotFoundError):
            ml.compute.get("gpu")
        (create,) = [op for op in quick.backend.store.operations() if op.action == "create"]
        assert create.status == "Canceled" and "deleted before it completed" in create.error["message"]
        time.sleep(max(0.0, create_s + 0.5 - (time.monotonic() - started)))   # past the create's due time
        assert [c.name for c in ml.compute.list()] == []
        with pytest.raises(ResourceNotFoundError):
            ml.compute.get("gpu")
