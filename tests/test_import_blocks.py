"""Import blocks (Terraform's `import {to, id}`) and `infra plan --generate-config-out` on the local Azure.

A cluster and an environment made outside infra (with azure-ai-ml against the emulator, or forgotten with
`infra state rm`) are named by import blocks; plan says they will be imported, --generate-config-out writes their
declarations read live (secrets as ${VAR}), the declarations merged into the stack apply as imports, and the plan
afterwards says No changes. The CLI runs as a child process on the test's emulator (INFRA_EMULATOR_URL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from emulator_fixtures import WORKSPACE_YAML

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"
SECRET = "Imp0rt-Me-secret!"
IMPORTS = """import:
  - {to: cluster.gpu, id: gpu}
  - {to: environment.train, id: train}
"""


def cli(*args: str, emulator, state: Path) -> subprocess.CompletedProcess:
    # MLClient in this test process set AZUREML_CURRENT_CLOUD to its emulator's cloud; a child must not inherit it
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD",)}
    env.update(INFRA_EMULATOR_URL=emulator.url, INFRA_LOCAL_DIR=str(state), GPU_ADMIN_PASSWORD=SECRET,
               INFRA_VAR_password=SECRET)
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _made_outside_infra(clients) -> None:
    from azure.ai.ml.entities import AmlCompute, Environment

    clients.ml.compute.begin_create_or_update(AmlCompute(
        name="gpu", size="Standard_ND96asr_v4", min_instances=0, max_instances=2, idle_time_before_scale_down=300,
        tags={"team": "ml"})).result()
    clients.ml.environments.create_or_update(Environment(
        name="train", version="3", image=IMAGE, tags={"owner": "data"},
        conda_file={"name": "train", "dependencies": ["python=3.10", {"pip": ["numpy"]}]}))


def test_sdk_made_cluster_and_environment_imported_through_generated_config(tmp_path, clients, emulator):
    _made_outside_infra(clients)
    state, stack, generated = tmp_path / "local", tmp_path / "stack.yaml", tmp_path / "generated.yaml"
    stack.write_text(f"stack: adopt\n{WORKSPACE_YAML}{IMPORTS}")

    undeclared = cli("plan", str(stack), "--local", emulator=emulator, state=state)
    assert undeclared.returncode == 1 and "stack.yaml:8:10: error[import.undeclared]" in undeclared.stderr
    # the stack as typed, so the hint runs from where the user is (it named `stack.yaml` alone)
    assert f"`infra plan {stack} --generate-config-out FILE" in undeclared.stderr, undeclared.stderr

    made = cli("plan", str(stack), "--local", "--generate-config-out", str(generated), emulator=emulator, state=state)
    assert made.returncode == 0, made.stdout + made.stderr
    # says what it did and what to do next, never "No changes" while imports are pending (Terraform: "Plan: 2 to
    # import, ..." and "generated configuration and written it to FILE")
    assert "No changes" not in made.stdout, made.stdout
    assert "Plan: 2 to import (their declarations generated), 0 to add, 0 to change, 0 to destroy." in made.stdout
    assert (f"infra generated the declarations of 2 resources to import (cluster.gpu, environment.train), read from "
            f"Azure, and wrote them to {generated}.") in made.stdout, made.stdout
    assert f"paste its blocks into {stack}, then run `infra plan {stack} --local` again" in made.stdout
    text = generated.read_text()
    assert "# cluster.gpu: read from Azure ML compute 'gpu' (AmlCompute) in workspace 'mlw-test'" in text
    assert "# environment.train: read from Azure ML environment 'train' version 3 in workspace 'mlw-test'" in text
    declared = yaml.safe_load(text)
    gpu = declared["clusters"]["gpu"]
    assert (gpu["size"], gpu["min_instances"], gpu["max_instances"], gpu["idle_time_before_scale_down"],
            gpu["tags"]) == ("Standard_ND96asr_v4", 0, 2, 300, {"team": "ml"})
    train = declared["environments"]["train"]
    assert train["image"] == IMAGE and train["tags"] == {"owner": "data"}
    assert train["conda_file"]["dependencies"] == ["python=3.10", {"pip": ["numpy"]}]

    again = cli("plan", str(stack), "--local", "--generate-config-out", str(generated), emulator=emulator, state=state)
    assert again.returncode == 1 and "error[generate-config.exists]" in again.stderr
    assert generated.read_text() == text   # never overwritten

    stack.write_text(stack.read_text() + text)   # merged
    plan = cli("plan", str(stack), "--local", "--json", emulator=emulator, state=state)
    assert plan.returncode == 0, plan.stderr
    changes = {c["address"]: c["change"] for c in json.loads(plan.stdout)["resource_changes"]}
    assert changes["cluster.gpu"] == {**changes["cluster.gpu"], "actions": ["no-op"], "importing": {"id": "gpu"}}
    assert changes["environment.train"]["importing"] == {"id": "train"}
    assert changes["environment.train"]["actions"] == ["no-op"]
    shown = cli("plan", str(stack), "--local", emulator=emulator, state=state)
    assert "# cluster.gpu will be imported" in shown.stdout and "# environment.train will be imported" in shown.stdout
    assert "Plan: 2 to import, 0 to add, 0 to change, 0 to destroy." in shown.stdout

    applied = cli("apply", str(stack), "--local", "--auto-approve", "--no-smoke", emulator=emulator, state=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Resources: 2 imported, 0 added, 0 changed, 0 destroyed." in applied.stdout
    after = cli("plan", str(stack), "--local", emulator=emulator, state=state)   # the blocks stay: no-ops
    assert after.returncode == 0 and "No changes. Your infrastructure matches the stack." in after.stdout, after.stdout
    listed = cli("state", "list", str(stack), "--local", emulator=emulator, state=state)
    assert listed.stdout == "cluster.gpu\nenvironment.train\n"
    assert clients.ml.environments.get("train", version="3").tags["owner"] == "data"   # adopted, not re-registered


FORGET = f"""variables:
  password: {{type: string, sensitive: true}}
stack: forget
{WORKSPACE_YAML}clusters:
  gpu:
    size: Standard_ND96asr_v4
    max_instances: 1
    ssh_settings: {{admin_username: azureuser, admin_password: "${{var.password}}"}}
environments:
  train: {{image: "{IMAGE}"}}
"""


def test_forgotten_resources_imported_with_a_change_and_secrets_as_placeholders(tmp_path, emulator):
    state, stack, generated = tmp_path / "local", tmp_path / "stack.yaml", tmp_path / "generated.yaml"
    stack.write_text(FORGET)
    outputs = [cli("apply", str(stack), "--auto-approve", "--local", "--no-smoke", emulator=emulator, state=state)]
    assert outputs[0].returncode == 0, outputs[0].stdout + outputs[0].stderr
    for address in ("cluster.gpu", "environment.train"):
        outputs.append(cli("state", "rm", address, str(stack), "--local", emulator=emulator, state=state))
        assert outputs[-1].returncode == 0, outputs[-1].stderr

    bare = tmp_path / "bare.yaml"
    bare.write_text(f"stack: forget\n{WORKSPACE_YAML}{IMPORTS}")
    outputs.append(cli("plan", str(bare), "--local", "--generate-config-out", str(generated), emulator=emulator,
                       state=state))
    assert outputs[-1].returncode == 0, outputs[-1].stderr
    text = generated.read_text()
    assert yaml.safe_load(text)["clusters"]["gpu"]["ssh_settings"] == {
        "admin_username": "azureuser", "admin_password": "${var.gpu_admin_password}"}
    assert yaml.safe_load(text)["variables"] == {"gpu_admin_password": {"type": "string", "sensitive": True}}
    assert "--var gpu_admin_password=..." in text
    assert SECRET not in text

    # the stack's own declaration, one scale setting changed: imported, then updated in place
    stack.write_text(FORGET.replace("max_instances: 1", "max_instances: 2") + IMPORTS)
    outputs.append(cli("plan", str(stack), "--local", emulator=emulator, state=state))
    plan = outputs[-1]
    assert plan.returncode == 0, plan.stderr
    assert "# cluster.gpu will be updated in-place\n  # (imported from \"gpu\")" in plan.stdout
    assert "max_instances" in plan.stdout and "# environment.train will be imported" in plan.stdout
    assert "Plan: 2 to import, 0 to add, 1 to change, 0 to destroy." in plan.stdout
    outputs.append(cli("apply", str(stack), "--local", "--auto-approve", "--no-smoke", emulator=emulator, state=state))
    assert outputs[-1].returncode == 0, outputs[-1].stdout + outputs[-1].stderr
    assert "Resources: 2 imported, 0 added, 1 changed, 0 destroyed." in outputs[-1].stdout
    outputs.append(cli("plan", str(stack), "--local", emulator=emulator, state=state))
    assert "No changes. Your infrastructure matches the stack." in outputs[-1].stdout, outputs[-1].stdout
    assert SECRET not in "".join(r.stdout + r.stderr for r in outputs)


def test_bad_import_blocks_are_errors_at_their_line(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(f"""stack: bad
{WORKSPACE_YAML}clusters:
  gpu: {{size: Standard_ND96asr_v4, max_instances: 1}}
import:
  - {{to: cluster.gpu, id: gpu-cluster}}
  - {{to: vm.gpu, id: gpu}}
""")
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "stack.yaml:11:10: error[stack.invalid]: import.1.to: must be cluster.NAME or environment.NAME" in r.stderr
    stack.write_text(stack.read_text().replace("  - {to: vm.gpu, id: gpu}\n", "  - {to: cluster.gpu, id: gpu}\n"))
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert "stack.yaml:10:27: error[import.name-mismatch]" in r.stderr and "Azure ML cannot rename" in r.stderr
    assert "stack.yaml:11:10: error[import.duplicate]: cluster.gpu is imported twice" in r.stderr
    stack.write_text(f"""stack: bad
{WORKSPACE_YAML}environments:
  acpt: {{curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu:1"}}
import:
  - {{to: environment.acpt, id: acpt}}
""")
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "stack.yaml:10:10: error[import.curated]" in r.stderr, r.stderr


def test_an_import_of_nothing_is_an_error_at_its_block(tmp_path, emulator):
    stack = tmp_path / "stack.yaml"
    stack.write_text(f"stack: none\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_ND96asr_v4, max_instances: 1}}\n"
                     "import:\n  - {to: cluster.gpu, id: gpu}\n")
    r = cli("plan", str(stack), "--local", emulator=emulator, state=tmp_path / "local")
    assert r.returncode == 1 and "stack.yaml:10:27: error[import.not-found]" in r.stderr, r.stdout + r.stderr
    # an undeclared target: --generate-config-out says it is not there, and its hint runs on the local Azure
    # (`az ml compute list` cannot reach it)
    stack.write_text(f"stack: none\n{WORKSPACE_YAML}import:\n  - {{to: cluster.gpu, id: gpu}}\n")
    r = cli("plan", str(stack), "--local", "--generate-config-out", str(tmp_path / "g.yaml"), emulator=emulator,
            state=tmp_path / "local")
    listing = f"`infra state list {stack} --local`"
    assert r.returncode == 1 and "error[import.not-found]" in r.stderr and listing in r.stderr, r.stderr
    assert "az ml" not in r.stderr
    r = cli(*listing.strip("`").split()[1:], emulator=emulator, state=tmp_path / "local")
    assert r.returncode == 0, r.stderr


def test_infra_import_adopts_a_forgotten_environment(tmp_path, emulator):
    """`infra import environment.NAME NAME STACK`, as for a cluster: its latest version gets the stack's tags (and
    the content hash, its content being the stack's), so the plan afterwards says No changes."""
    state, stack = tmp_path / "local", tmp_path / "stack.yaml"
    stack.write_text(FORGET)
    assert cli("apply", str(stack), "--auto-approve", "--local", "--no-smoke", emulator=emulator,
               state=state).returncode == 0
    assert cli("state", "rm", "environment.train", str(stack), "--local", emulator=emulator, state=state).returncode == 0
    unmanaged = cli("plan", str(stack), "--local", emulator=emulator, state=state)
    assert unmanaged.returncode == 1 and "import: [{to: environment.train, id: train}]" in unmanaged.stderr
    curated = tmp_path / "curated.yaml"
    curated.write_text(FORGET.replace(f'{{image: "{IMAGE}"}}', '{curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu:1"}'))
    refused = cli("import", "environment.train", "train", str(curated), "--local", emulator=emulator, state=state)
    assert refused.returncode == 1 and "is a curated environment" in refused.stderr, refused.stderr
    adopted = cli("import", "environment.train", "train", str(stack), "--local", emulator=emulator, state=state)
    assert adopted.returncode == 0 and "Imported train version 1 as environment.train." in adopted.stdout, adopted.stderr
    twice = cli("import", "environment.train", "train", str(stack), "--local", emulator=emulator, state=state)
    assert twice.returncode == 1 and "error[import.already-managed]" in twice.stderr, twice.stderr
    assert "environment 'train' (version 1) carries its ownership tags" in twice.stderr, twice.stderr
    after = cli("plan", str(stack), "--local", emulator=emulator, state=state)
    assert after.returncode == 0 and "No changes." in after.stdout, after.stdout + after.stderr


def test_infra_schema_covers_import_blocks():
    r = subprocess.run([sys.executable, "-m", "infra_cli", "schema"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    schema = json.loads(r.stdout)
    assert schema["properties"]["import"]["items"] == {"$ref": "#/$defs/Import"}
    block = schema["$defs"]["Import"]
    assert set(block["properties"]) == {"to", "id"} and set(block["required"]) == {"to", "id"}
    assert block["additionalProperties"] is False and "cluster.NAME" in block["properties"]["to"]["description"]
