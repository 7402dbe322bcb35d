"""Protection is the stack's, and survives adoption (issue 40), tried as a hostile user would on the local emulator
through the real CLI (each command starts its own in-process emulator over the same INFRA_LOCAL_DIR).

- `state rm` then `infra import` (the documented re-adoption), or an `import:` block applied, must leave a cluster
  the stack declares with lifecycle.prevent_destroy protected: an apply that then drops the cluster from the stack
  is refused, as it was before the `state rm`.
- `plan --replace` of a protected cluster, and an import block whose declaration forces a replacement, are plan
  errors (exit 1, also under --detailed-exitcode), not `-/+` with exit 0/2 that a CI gate would take as "ready".
- `--replace` of a cluster not yet created plans a create, never a destroy; `--replace` of an environment whose
  version is pinned is plan.replace-pinned.
- `state rm` run as another stack strips nothing of the owner's; `state rm` moves the stack's serial on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML

ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"
GPU = "  gpu: {size: Standard_ND96asr_v4, max_instances: 1, lifecycle: {prevent_destroy: true}}\n"
CPU = "  cpu: {size: Standard_D4s_v3, max_instances: 1}\n"


def stack_text(name: str, clusters: str, extra: str = "") -> str:
    return f"stack: {name}\n{WORKSPACE_YAML}clusters:\n{clusters}{extra}"


def infra(*args: str, state: Path) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], check=False, capture_output=True, text=True,
                       cwd=ROOT, timeout=300, env={**os.environ, "INFRA_LOCAL_DIR": str(state)})
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return r


def applied(stack: Path, state: Path) -> None:
    done = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state)
    assert done.returncode == 0, done.stdout + done.stderr


def applied_then_forgotten(stack: Path, state: Path, text: str, address: str) -> None:
    """`text` applied as `stack`, then `address` forgotten by `infra state rm` (Terraform's documented way to
    adopt a resource again: state rm, then import)."""
    stack.write_text(text)
    applied(stack, state)
    rm = infra("state", "rm", address, str(stack), "--local", state=state)
    assert rm.returncode == 0 and f"Removed {address} from stack" in rm.stdout, rm.stdout + rm.stderr


def owned(stack: Path, state: Path) -> list[str]:
    listed = infra("state", "list", str(stack), "--local", state=state)
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


def serial(stack: Path, state: Path) -> int:
    """The stack's serial as `plan --json` reports it (the state a saved plan is bound to)."""
    plan = infra("plan", str(stack), "--local", "--json", state=state)
    return json.loads(plan.stdout)["state"]["serial"]


def refused_to_drop_gpu(stack: Path, state: Path) -> None:
    """The stack without its gpu cluster: plan and apply refuse to destroy it, and it is still there."""
    stack.write_text(stack_text("guard", CPU))
    plan = infra("plan", str(stack), "--local", "--detailed-exitcode", state=state)
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert "error[plan.prevent-destroy]: cluster.gpu would be destroyed, but it was applied with " \
           "lifecycle.prevent_destroy" in plan.stderr, plan.stderr
    apply = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state)
    assert apply.returncode == 1 and "prevent-destroy" in apply.stderr, apply.stdout + apply.stderr
    assert "destroyed" not in apply.stdout, apply.stdout
    assert owned(stack, state) == ["cluster.cpu", "cluster.gpu"]


def test_state_rm_then_import_command_keeps_prevent_destroy(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    applied_then_forgotten(stack, state, stack_text("guard", GPU + CPU), "cluster.gpu")
    adopted = infra("import", "cluster.gpu", "gpu", str(stack), "--local", state=state)
    assert adopted.returncode == 0, adopted.stderr
    assert "Imported gpu as cluster.gpu, protected by lifecycle.prevent_destroy." in adopted.stdout, adopted.stdout
    # protected before import returned: nothing left for a plan to restore (no `prevent_destroy = false -> true`)
    again = infra("plan", str(stack), "--local", "--detailed-exitcode", state=state)
    assert again.returncode == 0 and "No changes." in again.stdout, again.stdout + again.stderr
    refused_to_drop_gpu(stack, state)


def test_state_rm_then_import_block_keeps_prevent_destroy(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    applied_then_forgotten(stack, state, stack_text("guard", GPU + CPU), "cluster.gpu")
    stack.write_text(stack_text("guard", GPU + CPU, "import:\n  - {to: cluster.gpu, id: gpu}\n"))
    adopted = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state)
    assert adopted.returncode == 0 and "1 imported" in adopted.stdout, adopted.stdout + adopted.stderr
    refused_to_drop_gpu(stack, state)


def test_replace_of_a_protected_cluster_or_a_pinned_environment_is_a_plan_error(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    stack.write_text(stack_text("guard", GPU, f'environments:\n  train: {{image: "{IMAGE}", version: "3"}}\n'))
    applied(stack, state)

    for flags in ((), ("--detailed-exitcode",)):
        plan = infra("plan", str(stack), "--local", "--replace", "cluster.gpu", *flags, state=state)
        assert plan.returncode == 1, (flags, plan.stdout + plan.stderr)
        assert "stack.yaml:8:83: error[plan.prevent-destroy]: cluster.gpu would be replaced (--replace cluster.gpu), " \
               "but the stack sets lifecycle.prevent_destroy" in plan.stderr, plan.stderr
        assert "hint: leave out --replace cluster.gpu, or set clusters.gpu.lifecycle.prevent_destroy: false and " \
               "apply that first" in plan.stderr
        assert "Not applicable until the error is fixed" in plan.stdout, plan.stdout
    as_json = infra("plan", str(stack), "--local", "--json", "--replace", "cluster.gpu", state=state)
    assert as_json.returncode == 1
    assert [d["rule"] for d in json.loads(as_json.stdout)["diagnostics"] if d["severity"] == "error"] == \
        ["plan.prevent-destroy"]
    apply = infra("apply", str(stack), "--replace", "cluster.gpu", "--auto-approve", "--local", "--no-smoke",
                  state=state)
    assert apply.returncode == 1 and "error[plan.prevent-destroy]" in apply.stderr, apply.stdout + apply.stderr

    # protected by the live tag of the last apply only (the stack says nothing now): still refused
    bare = tmp_path / "bare.yaml"
    bare.write_text(stack_text("guard", GPU.replace(", lifecycle: {prevent_destroy: true}", ""),
                               f'environments:\n  train: {{image: "{IMAGE}", version: "3"}}\n'))
    live_only = infra("plan", str(bare), "--local", "--replace", "cluster.gpu", "--detailed-exitcode", state=state)
    assert live_only.returncode == 1, live_only.stdout + live_only.stderr
    assert "error[plan.prevent-destroy]: cluster.gpu would be replaced (--replace cluster.gpu), but it was applied " \
           "with lifecycle.prevent_destroy" in live_only.stderr, live_only.stderr

    pinned = infra("plan", str(stack), "--local", "--replace", "environment.train", "--detailed-exitcode", state=state)
    assert pinned.returncode == 1, pinned.stdout + pinned.stderr
    assert "error[plan.replace-pinned]: --replace environment.train: its version is pinned, and Azure ML " \
           "environment versions are immutable" in pinned.stderr, pinned.stderr
    assert "hint: bump environments.train.version instead" in pinned.stderr
    assert owned(stack, state) == ["cluster.gpu", "environment.train"]


def test_replace_of_what_does_not_exist_yet_plans_a_create_only(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    stack.write_text(stack_text("fresh", GPU, f'environments:\n  train: {{image: "{IMAGE}"}}\n'))
    plan = infra("plan", str(stack), "--local", "--json", "--detailed-exitcode", "--replace", "cluster.gpu",
                 "--replace", "environment.train", state=state)
    assert plan.returncode == 2, plan.stdout + plan.stderr   # changes, no error: nothing protected is destroyed
    data = json.loads(plan.stdout)
    assert {c["address"]: c["change"]["actions"] for c in data["resource_changes"]} == \
        {"cluster.gpu": ["create"], "environment.train": ["create"]}
    assert [d for d in data["diagnostics"] if d["severity"] == "error"] == []
    text = infra("plan", str(stack), "--local", "--replace", "cluster.gpu", state=state)
    assert text.returncode == 0 and "Plan: 2 to add, 0 to change, 0 to destroy." in text.stdout, text.stdout


def test_an_import_block_that_forces_a_replacement_is_a_plan_error(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    applied_then_forgotten(stack, state, stack_text("guard", CPU), "cluster.cpu")
    block = "import:\n  - {to: cluster.cpu, id: cpu}\n"
    stack.write_text(stack_text("guard", CPU.replace("D4s_v3", "D8s_v3"), block))
    for flags in ((), ("--detailed-exitcode",)):
        plan = infra("plan", str(stack), "--local", *flags, state=state)
        assert plan.returncode == 1, (flags, plan.stdout + plan.stderr)
        assert "stack.yaml:10:27: error[import.forces-replacement]: import of cluster.cpu: the stack declares it " \
               "with another size than the cluster 'cpu' has (size = 'Standard_D4s_v3'), which Azure cannot " \
               "change in place: the apply would destroy the cluster it imports" in plan.stderr, plan.stderr
        assert f"hint: declare clusters.cpu as it is live (`infra plan {stack} --generate-config-out FILE" \
            in plan.stderr
    apply = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state)
    assert apply.returncode == 1 and "error[import.forces-replacement]" in apply.stderr, apply.stdout + apply.stderr
    assert owned(stack, state) == []   # nothing imported, nothing replaced

    # declared with prevent_destroy too: the protection is the error, once
    protected = stack_text("guard", CPU.replace("D4s_v3", "D8s_v3").replace(
        "max_instances: 1", "max_instances: 1, lifecycle: {prevent_destroy: true}"), block)
    stack.write_text(protected)
    plan = infra("plan", str(stack), "--local", "--json", state=state)
    assert plan.returncode == 1
    assert [d["rule"] for d in json.loads(plan.stdout)["diagnostics"] if d["severity"] == "error"] == \
        ["plan.prevent-destroy"]
    # as it is live: imported as it is
    stack.write_text(stack_text("guard", CPU, block))
    same = infra("plan", str(stack), "--local", "--detailed-exitcode", state=state)
    assert same.returncode == 2 and "Plan: 1 to import, 0 to add, 0 to change, 0 to destroy." in same.stdout, \
        same.stdout + same.stderr


def test_state_rm_as_another_stack_strips_nothing(tmp_path):
    state, alpha, beta = tmp_path / "state", tmp_path / "alpha.yaml", tmp_path / "beta.yaml"
    alpha.write_text(stack_text("alpha", CPU))
    beta.write_text(stack_text("beta", CPU))   # declares the same name: a same-named cluster it does not own
    applied(alpha, state)
    before = serial(alpha, state)
    stolen = infra("state", "rm", "cluster.cpu", str(beta), "--local", state=state)
    assert stolen.returncode == 1, stolen.stdout + stolen.stderr
    assert "error[state-rm.invalid]: stack 'beta' owns no cluster.cpu" in stolen.stderr, stolen.stderr
    assert owned(alpha, state) == ["cluster.cpu"]
    kept = infra("plan", str(alpha), "--local", "--detailed-exitcode", state=state)
    assert kept.returncode == 0 and "No changes." in kept.stdout, kept.stdout + kept.stderr
    assert serial(alpha, state) == before   # nothing of alpha's was written


def test_state_rm_moves_the_serial_on(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    stack.write_text(stack_text("guard", CPU))
    applied(stack, state)
    planned = tmp_path / "before.plan"
    assert infra("plan", str(stack), "--local", "--out", str(planned), state=state).returncode == 0
    before = serial(stack, state)
    assert infra("state", "rm", "cluster.cpu", str(stack), "--local", state=state).returncode == 0
    assert serial(stack, state) == before + 1
    # a plan saved before the state rm is stale by its serial (Terraform's "Saved plan is stale")
    stale = infra("apply", str(planned), "--local", "--no-smoke", state=state)
    assert stale.returncode == 1 and "error[apply.stale-plan]: Saved plan is stale" in stale.stderr, stale.stderr
    assert f"it is now at serial {before + 1} of the same lineage" in stale.stderr
