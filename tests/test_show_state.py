"""`infra show [PLANFILE|STACK]` and `infra state list STACK` through the real CLI, against the local emulator.

The CLI runs as a child process pointed at the test's emulator (INFRA_EMULATOR_URL, INFRA_LOCAL_DIR), so
each call talks real HTTPS through the Azure SDKs; changes are made in-process with the same engine.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from emulator_fixtures import WORKSPACE_YAML

from infra_cli.apply.engine import apply_outcome
from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.engine import plan_stack
from infra_cli.stack.load import load_stack

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "Hunter2!state-secret"
OWNER = "owner-from-a-variable"

STACK = f"""
stack: shown
{WORKSPACE_YAML}clusters:
  zeta:
    size: Standard_ND96asr_v4
    max_instances: 2
    idle_time_before_scale_down: 900
    tags: {{owner: "${{OWNER}}", team: ml}}
    ssh_settings: {{admin_username: azureuser, admin_password: "${{ADMIN_PASSWORD}}"}}
  alpha:
    size: Standard_ND96amsr_A100_v4
    max_instances: 1
environments:
  train:
    image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04
    conda_file: conda.yaml
distributions:
  ddp: {{cluster: zeta, environment: train, type: pytorch, instance_count: 2, process_count_per_instance: 8}}
"""

VARIABLES = {"OWNER": OWNER, "ADMIN_PASSWORD": PASSWORD}


def write_stack(directory: Path, text: str = STACK) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "conda.yaml").write_text("dependencies: [python=3.10]\n")
    path = directory / "stack.yaml"
    path.write_text(text)
    return path


def converge(path: Path, clients) -> None:
    result = apply_outcome(plan_stack(load_stack(path, environ=VARIABLES), AzureProvider(clients)))
    assert result.ok, result.failures


def cli(*args: str, emulator=None, state_dir: Path | None = None, importtime: bool = False,
        variables: dict | None = None) -> subprocess.CompletedProcess:
    # MLClient in this test process set AZUREML_CURRENT_CLOUD to its emulator's cloud; a child must not inherit it
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "INFRA_EMULATOR_URL")}
    env.update(VARIABLES if variables is None else variables)
    if emulator is not None:
        env["INFRA_EMULATOR_URL"] = emulator.url
        env["INFRA_LOCAL_DIR"] = str(state_dir)
    flags = ["-X", "importtime"] if importtime else []
    r = subprocess.run([sys.executable, *flags, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


@pytest.fixture
def stack(tmp_path) -> Path:
    return write_stack(tmp_path)


# ---- infra show PLANFILE ----------------------------------------------------------------------------------

def test_show_planfile_prints_what_plan_printed_text_and_json_and_imports_no_azure(tmp_path, stack, emulator):
    state = tmp_path / "local"
    planfile = tmp_path / "plan.out"
    planned = cli("plan", str(stack), "--local", "--out", str(planfile), emulator=emulator, state_dir=state)
    assert planned.returncode == 0, planned.stderr
    saved_line = f"\nSaved the plan to {planfile}. To perform exactly these actions: infra apply {planfile} --local\n"
    assert planned.stdout.endswith(saved_line)
    assert "+ resource \"cluster\" \"zeta\"" in planned.stdout

    # offline: no emulator, no Azure variables, and no azure.* module loaded
    shown = cli("show", str(planfile), importtime=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == planned.stdout[: -len(saved_line)]
    loaded = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", shown.stderr, re.M))
    assert "infra_cli.commands.views.plan" in loaded
    assert not sorted(m for m in loaded if re.match(r"^(azure|torch|jinja2|infra_cli\.emulator)", m))
    assert PASSWORD not in shown.stdout + shown.stderr and PASSWORD not in planfile.read_text()

    as_json = cli("plan", str(stack), "--local", "--json", "--out", str(planfile), emulator=emulator, state_dir=state)
    shown = cli("show", str(planfile), "--json")
    assert shown.returncode == 0, shown.stderr
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(shown.stdout) == json.loads(as_json.stdout)   # keys come back sorted from the file
    zeta = next(c for c in json.loads(shown.stdout)["resource_changes"] if c["address"] == "cluster.zeta")
    assert zeta["change"]["after"]["tags"]["owner"] == "(sensitive value)" and OWNER not in shown.stdout


def test_show_refresh_only_planfile_keeps_its_drift(tmp_path, stack, emulator, clients):
    converge(stack, clients)
    entity = clients.ml.compute.get("alpha")
    entity.max_instances = 3
    entity.network_settings = None  # azure-ai-ml cannot PUT back an entity it read without a subnet
    clients.ml.compute.begin_create_or_update(entity).result()  # someone scales it in the portal
    planfile = tmp_path / "drift.out"
    planned = cli("plan", str(stack), "--local", "--refresh-only", "--out", str(planfile), emulator=emulator,
                  state_dir=tmp_path / "local")
    assert planned.returncode == 0 and "# cluster.alpha has changed" in planned.stdout, planned.stderr
    shown = cli("show", str(planfile))
    assert shown.returncode == 0, shown.stderr
    assert "# cluster.alpha has changed" in shown.stdout and "max_instances = 1 -> 3" in shown.stdout
    assert shown.stdout in planned.stdout


def test_show_refuses_a_stale_corrupt_or_foreign_file(tmp_path, stack, emulator):
    planfile = tmp_path / "plan.out"
    assert cli("plan", str(stack), "--local", "--out", str(planfile), emulator=emulator,
               state_dir=tmp_path / "local").returncode == 0

    # the stack changed since: apply would refuse the plan, and show says so
    stack.write_text(STACK.replace("max_instances: 2", "max_instances: 4"))
    r = cli("show", str(planfile))
    assert (r.returncode, r.stdout) == (1, "")
    assert "error[planfile.stale]" in r.stderr and "infra plan" in r.stderr

    # the stack cannot be read here (its ${VAR}s unset): shown, with a warning that it was not checked
    stack.write_text(STACK)
    r = cli("show", str(planfile), variables={})
    assert r.returncode == 0 and "cluster.zeta" in r.stdout and "warning[planfile.unchecked]" in r.stderr

    corrupt = tmp_path / "corrupt.out"
    corrupt.write_text(planfile.read_text()[:200])
    foreign_json = tmp_path / "plan.json"
    foreign_json.write_text(cli("show", str(planfile), "--json").stdout)   # `infra plan --json` output
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "something-else"}))
    older = tmp_path / "older.out"
    older.write_text(json.dumps({**json.loads(planfile.read_text()), "format_version": "0.1"}))
    tfplan = tmp_path / "tfplan"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("tfplan", b"\x00terraform")
    tfplan.write_bytes(buffer.getvalue())
    expected = {corrupt: "cannot read plan file", foreign_json: "the JSON `infra plan --json` prints",
                other: "not an infra plan file", older: "plan file format 0.1 is not",
                tfplan: "as Terraform writes its plans"}
    for path, message in expected.items():
        r = cli("show", str(path))
        assert r.returncode == 1 and r.stdout == "", (path, r.stdout)
        assert "error[planfile.invalid]" in r.stderr and message in r.stderr, (path, r.stderr)

    r = cli("show")
    assert r.returncode == 1 and "infra show PLANFILE" in r.stderr and "infra show STACK" in r.stderr


# ---- infra state list / infra show STACK -------------------------------------------------------------------

def test_state_list_is_what_the_stack_owns_from_its_tags_sorted(tmp_path, stack, emulator, clients):
    from azure.ai.ml.entities import AmlCompute

    state = tmp_path / "local"
    r = cli("state", "list", str(stack), "--local", emulator=emulator, state_dir=state)
    assert (r.returncode, r.stdout) == (0, ""), r.stderr        # nothing applied yet: an empty state

    converge(stack, clients)
    clients.ml.compute.begin_create_or_update(AmlCompute(name="untagged", size="Standard_NC24ads_A100_v4",
                                                         max_instances=1)).result()
    other = write_stack(tmp_path / "other", STACK.replace(
        "stack: shown", "stack: other").replace("  zeta:", "  beta:").replace("  alpha:", "  gamma:").replace(
        "cluster: zeta", "cluster: beta").replace("  train:", "  other-train:").replace(
        "environment: train", "environment: other-train"))
    converge(other, clients)

    r = cli("state", "list", str(stack), "--local", emulator=emulator, state_dir=state)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["cluster.alpha", "cluster.zeta", "environment.train"]   # alphabetical

    # a cluster taken out of the stack is still its own until the next apply destroys it
    write_stack(tmp_path, STACK.replace("""  alpha:
    size: Standard_ND96amsr_A100_v4
    max_instances: 1
""", ""))
    r = cli("state", "list", str(stack), "--local", emulator=emulator, state_dir=state)
    assert r.stdout.splitlines() == ["cluster.alpha", "cluster.zeta", "environment.train"], r.stderr
    converge(stack, clients)
    r = cli("state", "list", str(stack), "--local", emulator=emulator, state_dir=state)
    assert r.stdout.splitlines() == ["cluster.zeta", "environment.train"], r.stderr
    r = cli("state", "list", str(other), "--local", emulator=emulator, state_dir=state)
    assert r.stdout.splitlines() == ["cluster.beta", "cluster.gamma", "environment.other-train"], r.stderr


def test_show_stack_is_the_live_state_as_terraform_shows_it_secrets_masked(tmp_path, stack, emulator, clients):
    converge(stack, clients)
    state = tmp_path / "local"
    r = cli("show", str(stack), "--local", "--json", emulator=emulator, state_dir=state)
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    resources = body["values"]["root_module"]["resources"]
    assert body["stack"] == "shown" and [x["address"] for x in resources] == [
        "cluster.alpha", "cluster.zeta", "environment.train"]
    zeta = resources[1]
    assert {k: zeta[k] for k in ("mode", "type", "name")} == {"mode": "managed", "type": "cluster", "name": "zeta"}
    values = zeta["values"]
    assert values["size"] == "Standard_ND96asr_v4" and values["max_instances"] == 2
    assert values["ssh_admin_username"] == "azureuser" and values["tags"] == {"owner": "(sensitive value)", "team": "ml"}
    assert values["ssh_credentials_hash"] == "(sensitive value)"
    assert zeta["sensitive_values"] == {"ssh_credentials_hash": True, "tags": {"owner": True}}
    train = resources[2]
    assert train["values"]["version"] == "1" and "next_version" not in train["values"]
    assert PASSWORD not in r.stdout and OWNER not in r.stdout

    text = cli("show", str(stack), "--local", emulator=emulator, state_dir=state)
    assert text.returncode == 0, text.stderr
    assert '# cluster.zeta:\nresource "cluster" "zeta" {\n' in text.stdout
    assert re.search(r'^    max_instances +\= 2$', text.stdout, re.M)
    assert re.search(r'^        "owner" = \(sensitive value\)$', text.stdout, re.M)
    assert "subnet" not in text.stdout   # null attributes are left out, as terraform show does
    assert PASSWORD not in text.stdout and OWNER not in text.stdout

    empty = write_stack(tmp_path / "empty", STACK.replace("stack: shown", "stack: nothing-yet"))
    r = cli("show", str(empty), "--local", emulator=emulator, state_dir=state)
    assert (r.returncode, r.stdout) == (0, "Stack 'nothing-yet' owns no resources in Azure.\n")
    r = cli("show", str(empty), "--local", "--json", emulator=emulator, state_dir=state)
    assert json.loads(r.stdout)["values"]["root_module"]["resources"] == []


def test_state_commands_on_a_bad_stack_say_why_exit_1(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("stack: x\nclusters: [\n")
    for args in (["state", "list", str(bad), "--local"], ["show", str(bad), "--local"],
                 ["state", "list", str(tmp_path / "missing.yaml"), "--local"]):
        r = cli(*args)
        assert r.returncode == 1 and r.stdout == "" and "error[" in r.stderr, (args, r.stderr)


def test_show_of_a_missing_file_names_both_forms_it_takes():
    r = cli("show", "missing.plan")
    assert r.returncode == 1 and r.stdout == "" and "error[show.not-found]: no such file: missing.plan" in r.stderr
    assert "infra plan STACK --out FILE" in r.stderr and "stack file" in r.stderr
