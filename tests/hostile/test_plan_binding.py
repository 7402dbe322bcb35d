"""A saved plan applies only where and when it was made (issue 31): it records the workspace (cloud, subscription,
resource group, name) and the stack's lineage and serial, kept on Azure beside the lock, as Terraform binds a
plan to its state.

The attacks: a stack whose workspace is `${WS}`, planned `--destroy` for staging and applied with WS=prod, destroyed
prod's cluster; a signed destroy plan applied, the cluster recreated, the same file applied again destroyed it
again; `infra show` called a plan current after the stack's workspace was edited. Two workspaces (each in its own
resource group) live on one local emulator: `--local` with INFRA_LOCAL_DIR in the test's tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from emulator_fixtures import WORKSPACE_YAML

from infra_cli.apply.engine import StalePlan, apply_outcome, prepare_from_plan_file
from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.engine import plan_stack
from infra_cli.plan.planfile import write_plan_file
from infra_cli.stack.load import load_stack
from infra_cli.state.serial import StateSerial

ROOT = Path(__file__).resolve().parents[2]
KEY = "binding-key-7Qx!never-shown"

SWAPPED = """stack: swap
workspace:
  subscription_id: 00000000-0000-0000-0000-0000000000b7
  resource_group: rg-${WS}
  name: ${WS}
  location: eastus
clusters:
  gpu:
    size: Standard_NC24ads_A100_v4
    max_instances: 1
"""


def _cli(state: Path, *args: str, ws: str | None = None, key: str | None = None) -> subprocess.CompletedProcess:
    # MLClient in this test process sets AZUREML_CURRENT_CLOUD to its emulator's cloud; a child must not inherit it
    env = {k: v for k, v in os.environ.items()
           if k not in ("AZUREML_CURRENT_CLOUD", "INFRA_EMULATOR_URL", "INFRA_PLAN_KEY", "WS")}
    env["INFRA_LOCAL_DIR"] = str(state)
    if ws is not None:
        env["WS"] = ws
    if key is not None:
        env["INFRA_PLAN_KEY"] = key
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert KEY not in r.stdout + r.stderr
    return r


def _plan_json(state: Path, stack: Path, ws: str | None = None) -> dict:
    r = _cli(state, "plan", str(stack), "--local", "--json", ws=ws)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _owned(state: Path, stack: Path, ws: str) -> list[str]:
    r = _cli(state, "state", "list", str(stack), "--local", ws=ws)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def _apply(state: Path, source: Path, ws: str | None = None, key: str | None = None) -> subprocess.CompletedProcess:
    return _cli(state, "apply", str(source), "--local", "--auto-approve", "--no-smoke", ws=ws, key=key)


def _resealed(path: Path, edit) -> Path:
    """The file with `edit(body)` applied and its sha256 digest recomputed, as anyone who knows the format can."""
    body = json.loads(path.read_text())
    edit(body)
    content = {k: v for k, v in body.items() if k not in ("digest", "hmac")}
    body["digest"] = "sha256:" + hashlib.sha256(
        json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    out = path.with_name("forged-" + path.name)
    out.write_text(json.dumps(body, indent=2))
    return out


@pytest.fixture
def two_workspaces(tmp_path):
    """The ${WS} stack applied in staging and in prod (two resource groups and workspaces, one emulator)."""
    state, stack = tmp_path / "local", tmp_path / "swap.yaml"
    stack.write_text(SWAPPED)
    for ws in ("staging", "prod"):
        r = _apply(state, stack, ws=ws)
        assert r.returncode == 0 and "1 added" in r.stdout, r.stdout + r.stderr
    return state, stack


def test_a_staging_destroy_plan_applied_with_ws_prod_is_refused_and_prod_is_untouched(tmp_path, two_workspaces):
    state, stack = two_workspaces
    planfile = tmp_path / "staging.plan"
    r = _cli(state, "plan", str(stack), "--local", "--destroy", "--out", str(planfile), ws="staging")
    assert r.returncode == 0 and "1 to destroy" in r.stdout, r.stderr
    recorded = json.loads(planfile.read_text())
    assert recorded["workspace"] == {"cloud": "AzureCloud", "subscription_id": "00000000-0000-0000-0000-0000000000b7",
                                     "resource_group": "rg-staging", "name": "staging"}
    assert recorded["state"]["serial"] == 1 and recorded["state"]["lineage"]
    prod_before = _plan_json(state, stack, ws="prod")["state"]

    r = _apply(state, planfile, ws="prod")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "error[planfile.other-workspace]" in r.stderr and "Saved plan is for another workspace" in r.stderr
    assert "workspace 'staging' (resource group 'rg-staging'" in r.stderr
    assert "workspace 'prod' (resource group 'rg-prod'" in r.stderr
    assert f"`infra plan {stack} --destroy --out {planfile} --local`" in r.stderr   # the exact command, as run
    assert "destroyed" not in r.stdout
    assert _owned(state, stack, "prod") == ["cluster.gpu"]
    assert _plan_json(state, stack, ws="prod")["state"] == prod_before   # nothing written in prod, not even a serial

    # show says so too, offline
    r = _cli(state, "show", str(planfile), ws="prod")
    assert (r.returncode, r.stdout) == (1, "") and "error[planfile.other-workspace]" in r.stderr

    # the workspace field forged to prod's (the digest recomputed): prod's state is another lineage
    forged = _resealed(planfile, lambda b: b["workspace"].update(resource_group="rg-prod", name="prod"))
    r = _apply(state, forged, ws="prod")
    assert r.returncode == 1 and "error[apply.stale-plan]" in r.stderr and "Saved plan is stale" in r.stderr
    assert "another lineage" in r.stderr, r.stderr
    assert _owned(state, stack, "prod") == ["cluster.gpu"]

    # where it was made, the same file applies: the refusals were about where, not about the file
    r = _apply(state, planfile, ws="staging")
    assert r.returncode == 0 and "1 destroyed" in r.stdout, r.stdout + r.stderr
    assert _owned(state, stack, "staging") == [] and _owned(state, stack, "prod") == ["cluster.gpu"]


def test_a_signed_destroy_plan_applied_again_after_the_cluster_was_recreated_is_stale(tmp_path):
    state, stack = tmp_path / "local", tmp_path / "swap.yaml"
    stack.write_text(SWAPPED)
    assert _apply(state, stack, ws="staging").returncode == 0
    planfile = tmp_path / "destroy.plan"
    r = _cli(state, "plan", str(stack), "--local", "--destroy", "--out", str(planfile), ws="staging", key=KEY)
    assert r.returncode == 0, r.stderr
    r = _apply(state, planfile, ws="staging", key=KEY)
    assert r.returncode == 0 and "1 destroyed" in r.stdout, r.stdout + r.stderr
    r = _apply(state, stack, ws="staging")   # recreated as it was
    assert r.returncode == 0 and "1 added" in r.stdout, r.stdout + r.stderr
    after = _plan_json(state, stack, ws="staging")
    assert after["state"]["serial"] == 3 and after["state"]["lineage"] == json.loads(planfile.read_text())["state"][
        "lineage"]   # create, destroy, create: one lineage, three writes

    r = _apply(state, planfile, ws="staging", key=KEY)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "error[apply.stale-plan]" in r.stderr and "Saved plan is stale" in r.stderr
    assert "changed by another operation after the plan was created" in r.stderr
    assert "made against serial 1 of lineage" in r.stderr and "now at serial 3 of the same lineage" in r.stderr
    assert f"`infra plan {stack} --destroy --out {planfile} --local`" in r.stderr
    assert _owned(state, stack, "staging") == ["cluster.gpu"]
    assert _plan_json(state, stack, ws="staging")["state"]["serial"] == 3   # a refused apply writes nothing


def test_show_flags_a_plan_whose_stack_workspace_was_edited(tmp_path):
    state, stack = tmp_path / "local", tmp_path / "stack.yaml"
    text = f"stack: edited\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}\n"
    stack.write_text(text)
    planfile = tmp_path / "tf.plan"
    assert _cli(state, "plan", str(stack), "--local", "--out", str(planfile)).returncode == 0
    r = _cli(state, "show", str(planfile))
    assert r.returncode == 0 and "cluster.gpu" in r.stdout
    assert "info[show.plan-bound]" in r.stderr and "state at serial 0 (nothing applied yet)" in r.stderr and "checked under the stack's lock at " \
        "apply" in r.stderr   # the serial is apply's to check; show says so

    stack.write_text(text.replace("name: mlw-test", "name: mlw-other"))
    r = _cli(state, "show", str(planfile))
    assert (r.returncode, r.stdout) == (1, "")
    assert "error[planfile.other-workspace]" in r.stderr and "'mlw-test'" in r.stderr and "'mlw-other'" in r.stderr
    r = _apply(state, planfile)
    assert r.returncode == 1 and "error[planfile.other-workspace]" in r.stderr and "added" not in r.stdout
    # a case change names the same workspace (ARM compares names without case)
    stack.write_text(text.replace("name: mlw-test", "name: MLW-Test"))
    assert _cli(state, "show", str(planfile)).returncode == 0


def test_a_plan_file_without_its_binding_is_refused(tmp_path):
    state, stack = tmp_path / "local", tmp_path / "stack.yaml"
    stack.write_text(f"stack: unbound\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, "
                     "max_instances: 1}\n")
    planfile = tmp_path / "tf.plan"
    assert _cli(state, "plan", str(stack), "--local", "--out", str(planfile)).returncode == 0
    for edit, says in [(lambda b: b.pop("workspace"), "plan file is missing 'workspace'"),
                       (lambda b: b.pop("state"), "plan file is missing 'state'"),
                       (lambda b: b["state"].update(serial=-1), "state.serial is a whole number"),
                       (lambda b: b["workspace"].update(name=7), "workspace is a mapping")]:
        r = _apply(state, _resealed(planfile, edit))
        assert r.returncode == 1 and "error[planfile.invalid]" in r.stderr and says in r.stderr, r.stderr
    assert _plan_json(state, stack)["state"] == {"lineage": None, "serial": 0}


def test_the_serial_is_checked_again_under_the_lock(tmp_path, emulator, clients):
    """A saved plan prepared (every check passed) while other applies write and put everything back as it was
    (the live fingerprint the same): under the lock, its serial is behind, and nothing is written."""
    stack = tmp_path / "stack.yaml"
    one = f"stack: raced\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}\n"
    stack.write_text(one)
    provider = AzureProvider(clients)
    assert plan_stack(load_stack(stack), provider).plan.state == StateSerial()
    assert apply_outcome(plan_stack(load_stack(stack), provider)).ok
    first = plan_stack(load_stack(stack), provider).plan.state
    assert first.serial == 1 and first.lineage
    assert not plan_stack(load_stack(stack), provider).plan.changes   # a no-op writes no serial

    stack.write_text(one.replace("max_instances: 1", "max_instances: 2"))
    outcome = plan_stack(load_stack(stack), provider)
    planfile = tmp_path / "scale.plan"
    write_plan_file(planfile, outcome.plan, outcome.loaded.path, [])
    prepared = prepare_from_plan_file(planfile, backend=lambda ws: provider, key=None)

    for text in (one.replace("max_instances: 1", "max_instances: 3"), one):   # out and back again
        stack.write_text(text)
        assert apply_outcome(plan_stack(load_stack(stack), provider)).ok
    stack.write_text(one.replace("max_instances: 1", "max_instances: 2"))
    assert plan_stack(load_stack(stack), provider).plan.live_fingerprint == outcome.plan.live_fingerprint
    with pytest.raises(StalePlan) as refused:
        apply_outcome(prepared)
    assert "Saved plan is stale" in str(refused.value) and "now at serial 3 of the same lineage" in str(refused.value)
    assert clients.ml.compute.get("gpu").max_instances == 1
    assert plan_stack(load_stack(stack), provider).plan.state == StateSerial(first.lineage, 3)
