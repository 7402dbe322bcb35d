"""`infra state rm ADDR STACK` (Terraform's state rm) on the local emulator: the resource loses the stack's
ownership tags and nothing else; `infra import` then adopts the cluster back (its SSH credentials from the
stack's sensitive variable, so Azure accepts the same PUT) and the plan says No changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML

ROOT = Path(__file__).resolve().parent.parent
STACK = f"""variables:
  password: {{type: string, sensitive: true}}
stack: forget
{WORKSPACE_YAML}clusters:
  gpu:
    size: Standard_ND96asr_v4
    max_instances: 1
    ssh_settings: {{admin_username: azureuser, admin_password: "${{var.password}}"}}
environments:
  train: {{image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"}}
"""
SECRET = "Forget-Me-N0t-secret!"


def infra(*args: str, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={**os.environ, "INFRA_LOCAL_DIR": str(state), "INFRA_VAR_password": SECRET})


def test_state_rm_then_import_round_trip(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    stack.write_text(STACK)
    done = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert infra("state", "list", str(stack), "--local", state=state).stdout == "cluster.gpu\nenvironment.train\n"

    unknown = infra("state", "rm", "cluster.nope", str(stack), "--local", state=state)
    assert unknown.returncode == 1 and "error[state-rm.invalid]" in unknown.stderr
    rm = infra("state", "rm", "cluster.gpu", str(stack), "--local", state=state)
    assert rm.returncode == 0 and "Removed cluster.gpu from stack 'forget'" in rm.stdout, rm.stderr
    env_rm = infra("state", "rm", "environment.train", str(stack), "--local", state=state)
    assert env_rm.returncode == 0 and "environment train (version 1)" in env_rm.stdout, env_rm.stderr
    assert infra("state", "list", str(stack), "--local", state=state).stdout == ""
    plan = infra("plan", str(stack), "--local", state=state)   # not owned: never touched
    assert plan.returncode == 1 and "error[plan.unmanaged-resource]" in plan.stderr
    assert "cluster 'gpu' already exists in Azure without this stack's ownership tag" in plan.stderr

    adopted = infra("import", "cluster.gpu", "gpu", str(stack), "--local", state=state)
    assert adopted.returncode == 0, adopted.stderr
    # Terraform's "Resource already managed": a second import would overwrite the hash of what was applied
    twice = infra("import", "cluster.gpu", "gpu", str(stack), "--local", state=state)
    assert twice.returncode == 1 and "error[import.already-managed]" in twice.stderr, twice.stdout + twice.stderr
    assert "cluster.gpu is already managed by stack 'forget'" in twice.stderr and "infra state rm cluster.gpu" in twice.stderr
    stack.write_text(STACK.split("environments:")[0])   # the forgotten environment left out of the stack
    again = infra("plan", str(stack), "--local", state=state)
    assert again.returncode == 0 and "No changes." in again.stdout, again.stdout + again.stderr
    shown = "".join(r.stdout + r.stderr for r in (done, rm, env_rm, plan, adopted, again))
    assert SECRET not in shown
