"""Stack variables, as Terraform's: `variables:`, `${var.NAME}`, INFRA_VAR_NAME, --var-file and --var in
command-line order, types, `allowed`, required and sensitive values; and one stack applied as two workspaces
(staging and prod) on the local emulator, each its own owner."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import parse_stack
from infra_cli.stack.variables import Inputs, VarInput

ROOT = Path(__file__).resolve().parent.parent

STACK = textwrap.dedent("""\
    variables:
      env: {type: string, default: staging, allowed: [staging, prod], description: target workspace}
      nodes: {type: number, default: 1}
      spot: {type: bool, default: false}
      admin_password: {type: string, sensitive: true}
    stack: train-${var.env}
    workspace:
      subscription_id: 00000000-0000-0000-0000-0000000000a1
      resource_group: rg-${var.env}
      name: mlw-${var.env}
      location: eastus
    clusters:
      a100:
        size: Standard_ND96asr_v4
        max_instances: ${var.nodes}
        tier: dedicated
        ssh_settings:
          admin_username: azureuser
          admin_password: ${var.admin_password}
    """)
SECRET = {"INFRA_VAR_admin_password": "Stag1ng-Secret-Value!"}
PROD_SECRET = "Pr0d-Secret-Value-xyz!"


def load(tmp_path: Path, *given: tuple[str, str], environ: dict | None = None, text: str = STACK):
    inputs = Inputs(tuple(VarInput(kind, value) for kind, value in given))
    return parse_stack(text, "stack.yaml", SECRET if environ is None else environ, inputs)


def errors(tmp_path: Path, *given, environ=None, text: str = STACK):
    with pytest.raises(DiagnosticError) as exc:
        load(tmp_path, *given, environ=environ, text=text)
    return exc.value.diagnostics


def var_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_defaults_and_types_are_kept(tmp_path):
    stack, source = load(tmp_path)
    assert stack.stack == "train-staging" and stack.workspace.resource_group == "rg-staging"
    assert stack.clusters["a100"].max_instances == 1   # exactly ${var.nodes}: a number, not "1"
    assert source.variables["nodes"].origin == "default"


def test_precedence_is_default_then_environment_then_the_command_line_in_order(tmp_path):
    four = var_file(tmp_path, "four.yaml", "nodes: 4\n")
    six = var_file(tmp_path, "six.json", '{"nodes": 6}')
    environ = {**SECRET, "INFRA_VAR_nodes": "3"}
    assert load(tmp_path, environ=environ)[0].clusters["a100"].max_instances == 3
    assert load(tmp_path, ("var-file", four), environ=environ)[0].clusters["a100"].max_instances == 4
    assert load(tmp_path, ("var", "nodes=5"), ("var-file", four))[0].clusters["a100"].max_instances == 4
    assert load(tmp_path, ("var-file", four), ("var", "nodes=5"))[0].clusters["a100"].max_instances == 5
    assert load(tmp_path, ("var-file", four), ("var", "nodes=5"), ("var-file", six))[0].clusters["a100"].max_instances == 6


def test_wrong_type_is_an_error_where_the_value_came_from(tmp_path):
    (d,) = errors(tmp_path, ("var", "nodes=x"))
    assert d.rule == "variable.type" and "--var nodes=x" in d.message and d.file is None
    bad = var_file(tmp_path, "bad.yaml", "env: prod\nnodes: many\n")
    (d,) = errors(tmp_path, ("var-file", bad))
    assert (d.file, d.line, d.column, d.rule) == (bad, 2, 8, "variable.type")
    (d,) = errors(tmp_path, environ={**SECRET, "INFRA_VAR_spot": "yes"})
    assert "INFRA_VAR_spot=yes" in d.message and "true or false" in d.hint


def test_a_value_outside_allowed_is_an_error(tmp_path):
    bad = var_file(tmp_path, "dev.yaml", "# dev\nenv: dev\n")
    (d,) = errors(tmp_path, ("var-file", bad))
    assert (d.file, d.line, d.column, d.rule) == (bad, 2, 6, "variable.not-allowed")
    assert '"staging", "prod"' in d.hint


def test_a_variable_without_a_value_names_the_three_ways_to_set_it(tmp_path):
    (d,) = errors(tmp_path, environ={})
    assert d.rule == "variable.missing" and "'admin_password'" in d.message and (d.line, d.column) == (5, 3)
    # a sensitive one: the environment only (test_variables_first_week.py names the three ways of a plain one)
    assert "INFRA_VAR_admin_password" in d.hint and "--var-file" not in d.hint, d.hint


def test_undeclared_flag_is_an_error_and_undeclared_file_key_a_warning(tmp_path):
    (d,) = errors(tmp_path, ("var", "nodse=2"))
    assert d.rule == "variable.undeclared" and "did you mean 'nodes'" in d.hint
    extra = var_file(tmp_path, "extra.yaml", "env: prod\nregion: westus\n")
    _, source = load(tmp_path, ("var-file", extra))
    (w,) = source.warnings
    assert (w.severity, w.file, w.line, w.rule) == ("warning", extra, 2, "variable.undeclared")
    (d,) = errors(tmp_path, text=STACK + "distributions:\n  d:\n    cluster: a100\n    environment: ${var.nope}\n")
    assert d.rule == "variable.undeclared" and (d.line, d.column) == (STACK.count("\n") + 4, 18)


def test_a_sensitive_value_is_marked_and_never_echoed(tmp_path):
    stack, source = load(tmp_path)
    assert ("clusters", "a100", "ssh_settings", "admin_password") in source.interpolated
    assert stack.stack == "train-staging" and ("stack",) not in source.interpolated   # plain values stay shown
    shown = "\n".join(d.format() for d in errors(tmp_path, ("var", "admin_password=x=1"), ("var", "env=qa")))
    assert "x=1" not in shown
    text = STACK.replace("max_instances: ${var.nodes}", "max_instances: ${var.admin_password}")
    shown = "\n".join(d.format() for d in errors(tmp_path, text=text))
    assert SECRET["INFRA_VAR_admin_password"] not in shown


def test_declarations_are_checked(tmp_path):
    text = STACK.replace("nodes: {type: number, default: 1}", "nodes: {type: integer, defualt: 1}")
    found = {d.rule: d for d in errors(tmp_path, text=text)}
    assert "did you mean 'default'" in found["stack.unknown-key"].hint
    assert "string, number, bool, list, map" in found["stack.invalid"].hint
    text = STACK.replace("default: staging", "default: dev")
    (d,) = errors(tmp_path, text=text)
    assert d.rule == "variable.not-allowed" and d.line == 2


def test_schema_covers_variables_and_outputs():
    from infra_cli.stack.schema import stack_json_schema

    schema = stack_json_schema()
    assert {"variables", "outputs"} <= set(schema["properties"])
    variable = schema["$defs"]["Variable"]["properties"]
    assert set(variable) == {"type", "default", "allowed", "description", "sensitive"}
    assert set(schema["$defs"]["Output"]["properties"]) == {"value", "description", "sensitive"}


def test_lists_and_maps_keep_their_type_and_cannot_stand_inside_text(tmp_path):
    text = STACK.replace("variables:\n", "variables:\n  tags: {type: map, default: {team: ml}}\n").replace(
        "    tier: dedicated\n", "    tier: dedicated\n    tags: ${var.tags}\n")
    stack, _ = load(tmp_path, ("var", "tags={team: infra, cost: gpu}"), text=text)
    assert stack.clusters["a100"].tags == {"team": "infra", "cost": "gpu"}
    (d,) = errors(tmp_path, text=text.replace("tags: ${var.tags}", "description: x-${var.tags}"))
    assert d.rule == "variable.type" and "cannot stand inside text" in d.message


OUTPUTS = textwrap.dedent("""\
    outputs:
      cluster_id: {value: "${cluster.a100.id}", description: ARM id for the training pipeline}
      nodes: {value: "${cluster.a100.max_instances}"}
      password: {value: "${cluster.a100.name}", sensitive: true}
    """)
ARM_ID = ("/subscriptions/00000000-0000-0000-0000-0000000000a1/resourceGroups/rg-{env}/providers/"
          "Microsoft.MachineLearningServices/workspaces/mlw-{env}/computes/a100")


# ---- the command line, on the local emulator ------------------------------------------------------------

def infra(*args: str, state: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "INFRA_LOCAL_DIR": str(state), **SECRET, **(env or {})}
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=environ,
                          cwd=ROOT, timeout=300)


def test_validate_takes_single_dash_spellings(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    r = infra("validate", str(stack), "-var=nodes=x", state=tmp_path / "state")
    assert r.returncode == 1 and "--var nodes=x: variable 'nodes' is a number" in r.stderr
    prod = var_file(tmp_path, "prod.yaml", "env: prod\nnodes: 3\n")
    r = infra("graph", str(stack), "-var-file", prod, state=tmp_path / "state")
    assert r.returncode == 0 and 'digraph "train-prod"' in r.stdout, r.stderr
    # --var and --var-file in the order written, across both options: the later one wins
    r = infra("graph", str(stack), "--var", "env=staging", "--var-file", prod, state=tmp_path / "state")
    assert 'digraph "train-prod"' in r.stdout, r.stderr
    r = infra("graph", str(stack), "--var-file", prod, "-var=env=staging", state=tmp_path / "state")
    assert 'digraph "train-staging"' in r.stdout, r.stderr


def test_staging_and_prod_are_separate_owners(tmp_path):
    """One stack file, two var files, two workspaces (resource groups) of one local Azure: each its own owner
    and lock; destroying staging leaves prod; a sensitive value is in no output and no plan file, though it enters
    the plan's attributes (the cluster's description) and an output, not only the SSH credentials' hash."""
    state = tmp_path / "state"
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK.replace("    tier: dedicated\n", "    tier: dedicated\n"
                                   "    description: \"a100, password ${var.admin_password}\"\n")
                     + OUTPUTS.replace('password: {value: "${cluster.a100.name}"',
                                       'password: {value: "${cluster.a100.name}/${var.admin_password}"'))
    staging = var_file(tmp_path, "staging.yaml", "env: staging\nnodes: 2\n")
    prod = var_file(tmp_path, "prod.yaml", f"env: prod\nnodes: 4\nadmin_password: '{PROD_SECRET}'\n")
    secrets = (PROD_SECRET, SECRET["INFRA_VAR_admin_password"])

    r = infra("apply", str(stack), "--var-file", staging, "--auto-approve", "--local", "--no-smoke", state=state)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Apply complete! Resources: 1 added" in r.stdout
    assert r.stdout.endswith("Outputs:\n\ncluster_id = \"" + ARM_ID.format(env="staging") + '"\nnodes      = 2\n'
                             "password   = <sensitive>\n"), r.stdout
    plan_file = tmp_path / "prod.plan"
    r = infra("plan", str(stack), "--var-file", prod, "--local", "--out", str(plan_file), state=state)
    assert r.returncode == 0 and "Plan: 1 to add, 0 to change, 0 to destroy." in r.stdout, r.stdout + r.stderr
    assert "  cluster_id = \"" + ARM_ID.format(env="prod") + "\"\n  nodes      = 4\n" in r.stdout
    saved = plan_file.read_text()
    (desired,) = json.loads(saved)["desired"]   # the secret is in the plan's attributes, as its keyed digest
    assert desired["attributes"]["description"].startswith("(sensitive value) scrypt:"), desired["attributes"]
    recorded = json.loads(saved)["variables"]
    assert recorded["env"] == {"value": "prod"} and recorded["nodes"] == {"value": 4}
    assert recorded["admin_password"]["sensitive"] is True and "value" not in recorded["admin_password"]
    r2 = infra("apply", str(plan_file), "--var", "nodes=5", "--local", state=state)
    assert r2.returncode == 1 and "error[apply.plan-variables]" in r2.stderr
    r3 = infra("apply", str(plan_file), "--local", state=state)   # the staging secret is not the plan's
    assert r3.returncode == 1 and "error[variable.plan-sensitive]" in r3.stderr
    r4 = infra("apply", str(plan_file), "--local", "--no-smoke", state=state,
               env={"INFRA_VAR_admin_password": PROD_SECRET})
    assert r4.returncode == 0 and "Apply complete! Resources: 1 added" in r4.stdout, r4.stdout + r4.stderr

    listed = {name: infra("show", str(stack), "--json", "--var-file", path, "--local", state=state)
              for name, path in (("staging", staging), ("prod", prod))}
    for (name, done), nodes in zip(listed.items(), (2, 4)):
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        (cluster,) = shown["values"]["root_module"]["resources"]
        assert shown["stack"] == f"train-{name}" and cluster["values"]["max_instances"] == nodes
    outputs = {name: json.loads(infra("output", str(stack), "--json", "--var-file", path, "--local", state=state).stdout)
               for name, path in (("staging", staging), ("prod", prod))}
    assert outputs["staging"]["cluster_id"] == {"value": ARM_ID.format(env="staging"), "type": "string",
                                                "sensitive": False}
    assert outputs["prod"]["nodes"] == {"value": 4, "type": "number", "sensitive": False}
    raw = infra("output", str(stack), "cluster_id", "--raw", "-var-file", prod, "--local", state=state)
    assert raw.stdout == ARM_ID.format(env="prod") + "\n", raw.stderr
    r5 = infra("destroy", str(stack), "--var-file", staging, "--auto-approve", "--local", state=state)
    assert r5.returncode == 0 and "1 destroyed" in r5.stdout, r5.stdout + r5.stderr
    assert infra("state", "list", str(stack), "--var-file", staging, "--local", state=state).stdout == ""
    gone = infra("output", str(stack), "--json", "--var-file", staging, "--local", state=state)
    assert gone.returncode == 0 and gone.stdout == "{}\n", gone.stdout + gone.stderr   # no state: {} (issue 34)
    assert infra("state", "list", str(stack), "-var-file", prod, "--local", state=state).stdout == "cluster.a100\n"
    r6 = infra("plan", str(stack), "--var-file", prod, "--local", state=state)
    assert "No changes" in r6.stdout, r6.stdout + r6.stderr
    assert re.search(r"\+ description +=  ?\(sensitive value\)\n", r.stdout), r.stdout
    everything = saved + "".join(x.stdout + x.stderr for x in (r, r2, r3, r4, r5, r6, raw, *listed.values())) + \
        json.dumps(outputs)
    assert not any(s in everything for s in secrets)
