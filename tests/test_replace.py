"""`--replace ADDR` (Terraform's -replace) on the local emulator: a cluster planned -/+ "(replace requested)"
and replaced, an environment given a new version of the same content; a saved plan keeps its --replace (and
takes none at apply); an address the stack does not have is an error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML

ROOT = Path(__file__).resolve().parent.parent
STACK = f"""stack: repl
{WORKSPACE_YAML}clusters:
  gpu: {{size: Standard_ND96asr_v4, max_instances: 1}}
environments:
  train: {{image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"}}
outputs:
  env: {{value: "${{environment.train.asset_id}}"}}
"""


def infra(*args: str, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={**os.environ, "INFRA_LOCAL_DIR": str(state)})


def test_replace_a_cluster_and_an_environment(tmp_path):
    state, stack = tmp_path / "state", tmp_path / "stack.yaml"
    stack.write_text(STACK)
    done = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state)
    assert done.returncode == 0 and 'env = "azureml:train:1"' in done.stdout, done.stdout + done.stderr

    bad = infra("plan", str(stack), "--replace", "cluster.nope", "--local", state=state)
    assert bad.returncode == 1 and "error[plan.unknown-replace]" in bad.stderr
    assert "addresses: cluster.gpu, environment.train" in bad.stderr

    plan_file = tmp_path / "r.plan"
    plan = infra("plan", str(stack), "-replace=cluster.gpu", "--replace", "environment.train", "--local",
                 "--out", str(plan_file), state=state)
    assert plan.returncode == 0, plan.stderr
    assert "  # cluster.gpu will be replaced, as requested\n  # (replace requested)\n  -/+ resource" in plan.stdout
    assert "# environment.train will get a new version (version 2)" in plan.stdout
    assert "Plan: 2 to add, 0 to change, 1 to destroy." in plan.stdout
    assert '  env = "azureml:train:2"' in plan.stdout   # the version the plan assigns (issue 34)
    refused = infra("apply", str(plan_file), "--replace", "cluster.gpu", "--local", state=state)
    assert refused.returncode == 1 and "error[apply.plan-replace]" in refused.stderr
    applied = infra("apply", str(plan_file), "--local", "--no-smoke", state=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Apply complete! Resources: 2 added, 0 changed, 1 destroyed." in applied.stdout
    assert applied.stdout.endswith('Outputs:\n\nenv = "azureml:train:2"\n'), applied.stdout
    again = infra("plan", str(stack), "--local", state=state)
    assert "No changes." in again.stdout, again.stdout
