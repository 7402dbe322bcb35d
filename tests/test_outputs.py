"""Output values: references checked at validate (an unknown address or attribute is an error at its line),
evaluated from the live state and smoke records, what a plan sets known and `(known after apply)` for the rest, and
`infra output` (text, --json, --raw). The CLI on the emulator is in tests/test_variables.py (staging and prod)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.plan.live import LiveState
from infra_cli.plan.model import Resource
from infra_cli.plan.outputs import output_values
from infra_cli.stack.load import LoadedStack, parse_stack
from infra_cli.stack.outputs import UNKNOWN
from infra_cli.state.records import SmokeRecord, record_from_tags, record_tags
from infra_cli.validate.engine import validate_stack

ROOT = Path(__file__).resolve().parent.parent

STACK = textwrap.dedent("""\
    stack: s
    workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
    clusters:
      a100: {size: Standard_ND96asr_v4, max_instances: 2}
    environments:
      train: {image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04", version: "3"}
    distributions:
      ddp: {cluster: a100, environment: train, type: pytorch, instance_count: 2, process_count_per_instance: 8}
    outputs:
      id: {value: "${cluster.a100.id}"}
      env: {value: "${environment.train.asset_id}"}
      busbw: {value: "${smoke.ddp.busbw_gbps}"}
      text: {value: "${smoke.ddp.verdict} on ${cluster.a100.size}"}
    """)


def loaded(text: str = STACK) -> LoadedStack:
    stack, source = parse_stack(text, "s.yaml", {})
    return LoadedStack(stack, Path("s.yaml"), source)


def test_unknown_addresses_and_attributes_are_errors_at_their_line():
    text = STACK + '  a: {value: "${cluster.h100.id}"}\n  b: {value: "${cluster.a100.sizes}"}\n  c: {value: plain}\n'
    found = {d.rule: d for d in validate_stack(loaded(text)) if d.rule.startswith("output.")}
    assert found["output.unknown-address"].line == 14 and "declared under clusters: a100" in found["output.unknown-address"].hint
    assert found["output.unknown-attribute"].line == 15 and "provisioning_state" in found["output.unknown-attribute"].hint
    assert found["output.no-reference"].line == 16
    assert not [d for d in validate_stack(loaded()) if d.rule.startswith("output.")]


def test_values_come_from_the_live_state_and_the_smoke_record():
    stack = loaded()
    cluster = Resource("cluster.a100", "cluster", "a100", {"size": "Standard_ND96asr_v4", "max_instances": 2,
                                                          "location": "eastus"}, {"infra.stack": "s"})
    env = Resource("environment.train", "environment", "train", {"version": "3"}, {"infra.stack": "s"})
    tags = record_tags("s", SmokeRecord("ddp", "passed", None, "job-1", "2026-01-01T00:00:00Z", busbw_gbps=181.5))
    record = record_from_tags("s", "ddp", tags)
    values = output_values(stack, LiveState({"cluster": {"a100": cluster}, "environment": {"train": env}}), {"ddp": record})
    assert values["id"].value.endswith("/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/mlw"
                                       "/computes/a100")
    assert values["env"].value == "azureml:train:3" and values["busbw"].value == 181.5
    assert values["text"].value == "passed on Standard_ND96asr_v4"
    planned = output_values(stack, LiveState(), {}, pending=["smoke.ddp", "cluster.a100"])
    assert planned["id"].value is UNKNOWN and planned["text"].value is UNKNOWN and planned["env"].value is None



def test_a_plan_knows_what_the_stack_sets_of_what_it_creates():
    """As Terraform shows values known from configuration (issue 34 walk: ib-a100's cluster_name and
    cluster_size were `(known after apply)` in the first plan): a cluster the plan creates has its name, size,
    max_instances, location and ARM id from the change's `after`, only provisioning_state unknown; a new
    environment version its name, version and asset id; a smoke that will run stays unknown."""
    from infra_cli.commands.views.outputs import plan_outputs_json
    from infra_cli.plan.model import ResourceChange

    text = STACK + ('  name: {value: "${cluster.a100.name}"}\n  nodes: {value: "${cluster.a100.max_instances}"}\n'
                    '  state: {value: "${cluster.a100.provisioning_state}"}\n'
                    '  version: {value: "${environment.train.version}"}\n')
    creates = [ResourceChange("cluster.a100", "cluster", "a100", ["create"], None,
                              {"size": "Standard_ND96asr_v4", "max_instances": 2, "location": "eastus"}),
               ResourceChange("environment.train", "environment", "train", ["create"], None, {"version": "3"})]
    planned = output_values(loaded(text), LiveState(), {}, changes=creates, pending=["smoke.ddp"])
    values = {name: v.value for name, v in planned.items()}
    assert values["id"].endswith("/workspaces/mlw/computes/a100") and values["name"] == "a100"
    assert values["nodes"] == 2 and values["env"] == "azureml:train:3" and values["version"] == "3"
    assert values["state"] is UNKNOWN and values["busbw"] is UNKNOWN and values["text"] is UNKNOWN
    json_changes = plan_outputs_json(planned)   # the plan JSON's output_changes follow
    assert json_changes["nodes"] == {"after": 2, "after_unknown": False, "after_sensitive": False}
    assert json_changes["state"] == {"after": None, "after_unknown": True, "after_sensitive": False}
    replaced = [ResourceChange("cluster.a100", "cluster", "a100", ["delete", "create"], {"max_instances": 1},
                               {"size": "Standard_ND96asr_v4", "max_instances": 4, "location": "eastus"})]
    again = output_values(loaded(text), LiveState(), {}, changes=replaced)
    assert again["nodes"].value == 4 and again["state"].value is UNKNOWN   # the replacement's, not the live 1


def test_output_without_name_refuses_raw(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(STACK)
    done = subprocess.run([sys.executable, "-m", "infra_cli", "output", str(path), "--raw", "--local"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")})
    assert done.returncode == 1 and "error[output.raw-needs-name]" in done.stderr



def test_output_of_a_stack_of_which_nothing_exists_is_no_outputs_not_nulls(tmp_path):
    """Before any apply (and after destroy: tests/test_variables.py), as Terraform with no state: a warning
    `No outputs found` saying why and what to run, exit 0, `{}` with --json; one named output is an error naming
    it, exit 1, --raw too (before: every output printed as null)."""
    path = tmp_path / "s.yaml"
    path.write_text(STACK)
    env = {**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    run = lambda *a: subprocess.run([sys.executable, "-m", "infra_cli", "output", str(path), *a, "--local"],
                                    capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    shown = run()
    assert shown.returncode == 0 and shown.stdout == "", shown.stdout + shown.stderr
    assert "warning[output.none]: No outputs found: nothing of stack 's' exists in workspace 'mlw'" in shown.stderr
    assert f"hint: `infra apply {path} --local` creates it" in shown.stderr, shown.stderr
    as_json = run("--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == {}, as_json.stdout + as_json.stderr
    raw = run("id", "--raw")
    assert raw.returncode == 1 and raw.stdout == "", raw.stdout
    assert 'error[output.not-found]: Output "id" not found: nothing of stack' in raw.stderr, raw.stderr


@pytest.mark.runs_jobs   # a smoke job on the emulator (tests/conftest.py schedules these first)
def test_smoke_outputs_after_apply(tmp_path):
    """apply runs the smoke job; its verdict, busbw, job and time are outputs, read live by `infra output`."""
    text = (ROOT / "stacks" / "ib-a100.yaml").read_text().split("\noutputs:")[0] + "\n"   # its own outputs here
    text = text.replace("instance_count: 2", "instance_count: 1").replace("process_count_per_instance: 8",
                                                                          "process_count_per_instance: 2")
    text += ('outputs:\n  busbw: {value: "${smoke.ddp.busbw_gbps}"}\n  verdict: {value: "${smoke.ddp.verdict}"}\n'
             '  version: {value: "${environment.acpt-pytorch.version}"}\n')
    path = tmp_path / "s.yaml"
    path.write_text(text)
    env = {**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    run = lambda *a: subprocess.run([sys.executable, "-m", "infra_cli", *a], capture_output=True, text=True,
                                    cwd=ROOT, timeout=600, env=env)
    plan = run("plan", str(path), "--local")
    assert "  busbw   = (known after apply)\n  verdict = (known after apply)\n" in plan.stdout, plan.stdout
    planned = json.loads(run("plan", str(path), "--local", "--json").stdout)["output_changes"]
    assert planned["busbw"] == {"after": None, "after_unknown": True, "after_sensitive": False}
    applied = run("apply", str(path), "--local", "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "\nOutputs:\n\nbusbw   = " in applied.stdout and 'verdict = "passed"' in applied.stdout
    shown = json.loads(run("output", str(path), "--json", "--local").stdout)
    assert shown["busbw"]["type"] == "number" and shown["busbw"]["value"] > 0
    assert shown["verdict"] == {"value": "passed", "type": "string", "sensitive": False}
    assert shown["version"]["value"].isdigit()


def test_the_quick_start_stack_has_outputs_infra_output_reads_after_apply(tmp_path):
    """stacks/ib-a100.yaml (the quick start's stack) declares outputs, so the README's `infra output
    stacks/ib-a100.yaml --local` after its apply prints them: the cluster, the environment, the smoke's
    figures (null and pending while no smoke ran)."""
    env = {**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    run = lambda command, *a: subprocess.run([sys.executable, "-m", "infra_cli", command, "stacks/ib-a100.yaml",
                                              *a, "--local"], capture_output=True, text=True, cwd=ROOT,
                                             timeout=300, env=env)
    applied = run("apply", "--auto-approve", "--no-smoke")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    done = run("output", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    values = {name: shown["value"] for name, shown in json.loads(done.stdout).items()}
    assert values == {
        "cluster_name": "a100", "cluster_size": "Standard_ND96asr_v4",
        "environment": "azureml://registries/azureml/environments/AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu"
                       "/versions/10",
        "smoke_verdict": "pending", "smoke_busbw_gbps": None}
    raw = run("output", "cluster_name", "--raw")
    assert raw.returncode == 0 and raw.stdout.strip() == "a100", raw.stdout + raw.stderr
