"""A team's first week with variables (issue 43): an unset sensitive variable blocks no command that does not use
it (offline validate judges it unknown, read-only commands need only what builds the stack's name and workspace),
var files are recognised by validate and the pre-commit hook, a var file's "4" is a number as `--var nodes=4` is,
and one bad value is one error that names where it came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import parse_stack
from infra_cli.stack.variables import Inputs, VarInput
from infra_cli.validate.engine import validate_files

from test_variables import STACK

ROOT = Path(__file__).resolve().parent.parent
SECRET = "Stag1ng-Secret-Value!"
WITH_OUTPUT = STACK + 'outputs:\n  cluster_name: {value: "${cluster.a100.name}"}\n'


def infra(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_VAR_")}
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**environ, **(env or {})}, timeout=300)


def project(tmp_path: Path) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "train.yaml").write_text(WITH_OUTPUT)
    return stacks


def test_offline_validate_judges_an_unset_variable_unknown_with_a_warning(tmp_path):
    stacks = project(tmp_path)
    found = validate_files([stacks / "train.yaml"], Inputs(unset_unknown=True))
    assert [d.severity for d in found] == ["warning"], [d.format() for d in found]
    (d,) = found
    assert d.rule == "variable.unknown" and "'admin_password'" in d.message
    # a secret is set from the environment (README: "a secret: never in a file"), never advised into a var file
    assert "INFRA_VAR_admin_password" in d.hint and "--var-file" not in d.hint, d.hint


def test_an_unset_variable_is_told_every_way_to_set_it_a_sensitive_one_the_environment():
    # issue 43 walk: the hint for an unset admin password said to write it in a var file, which the README and the
    # saved plan's own hint (variable.plan-sensitive: set INFRA_VAR_...) say never to do; the Action can set only env
    with pytest.raises(DiagnosticError) as exc:
        parse_stack(STACK, "stack.yaml", {}, Inputs())
    (secret,) = exc.value.diagnostics
    assert secret.rule == "variable.missing" and "'admin_password'" in secret.message
    assert "INFRA_VAR_admin_password" in secret.hint and "env:" in secret.hint, secret.hint
    assert "--var-file" not in secret.hint and "default:" not in secret.hint, secret.hint
    plain = STACK.replace("nodes: {type: number, default: 1}", "nodes: {type: number}")
    with pytest.raises(DiagnosticError) as exc:
        parse_stack(plain, "stack.yaml", {"INFRA_VAR_admin_password": SECRET}, Inputs())
    (nodes,) = exc.value.diagnostics
    assert "'nodes'" in nodes.message
    assert "--var nodes=VALUE" in nodes.hint and "`--var-file FILE` (a line `nodes: VALUE`)" in nodes.hint
    assert "INFRA_VAR_nodes" in nodes.hint


def test_an_unknown_value_brings_no_false_error_from_the_rules(tmp_path):
    # the size is a variable left unset: the placeholder it stands as is not judged an unknown size
    text = STACK.replace("size: Standard_ND96asr_v4", "size: ${var.size}").replace(
        "variables:\n", "variables:\n  size: {type: string}\n")
    (tmp_path / "s.yaml").write_text(text)
    found = validate_files([tmp_path / "s.yaml"], Inputs(unset_unknown=True))
    assert not [d for d in found if d.severity == "error"], [d.format() for d in found]
    assert {d.message.split("'")[1] for d in found if d.rule == "variable.unknown"} == {"size", "admin_password"}


def test_plan_and_apply_still_require_the_variable(tmp_path):
    with pytest.raises(DiagnosticError) as exc:
        parse_stack(STACK, "stack.yaml", {}, Inputs())
    assert [d.rule for d in exc.value.diagnostics] == ["variable.missing"]


def test_a_read_only_command_needs_only_the_variables_its_stack_name_and_workspace_use():
    needed = Inputs(unset_unknown=True, needed=("stack", "workspace"), command="`infra output`")
    stack, source = parse_stack(STACK, "stack.yaml", {}, needed)   # admin_password unset: not needed
    assert stack.stack == "train-staging"
    assert not source.warnings   # nothing said of a variable the command does not use
    text = STACK.replace("default: staging, ", "")   # env unset: the stack's name and workspace need it
    with pytest.raises(DiagnosticError) as exc:
        parse_stack(text, "stack.yaml", {}, needed)
    (d,) = exc.value.diagnostics
    assert d.rule == "variable.missing" and "'env'" in d.message and "`infra output` needs it" in d.message
    assert "stack" in d.message and "workspace.name" in d.message and "INFRA_VAR_env" in d.hint


def test_the_hook_passes_without_secrets_and_says_a_variables_file_for_the_stack(tmp_path):
    stacks = project(tmp_path)
    (stacks / "staging.yaml").write_text("env: staging\nnodes: 4\n")
    (stacks / "prod.vars.json").write_text('{"env": "prod", "nodes": "4", "spot": "true"}')
    got = infra("validate", "--json", "stacks/train.yaml", "stacks/staging.yaml", "stacks/prod.vars.json", cwd=tmp_path)
    assert got.returncode == 0, got.stdout + got.stderr
    found = json.loads(got.stdout)["diagnostics"]
    said = {(d["file"], d["rule"]): d["message"] for d in found}
    assert said[("stacks/staging.yaml", "variable.file-for")] == "a variables file for stacks/train.yaml"
    assert said[("stacks/prod.vars.json", "variable.file-for")] == "a variables file for stacks/train.yaml"
    assert not any("stack:" in (d["hint"] or "") for d in found)
    # found by folder alone too, as the hook passes only the files that changed
    alone = infra("validate", "stacks/staging.yaml", cwd=tmp_path)
    assert alone.returncode == 0 and "a variables file for stacks/train.yaml" in alone.stderr, alone.stderr


def test_validates_summary_counts_variables_files_apart_from_stacks(tmp_path):
    stacks = project(tmp_path)
    (stacks / "staging.yaml").write_text("env: staging\nnodes: 4\n")
    (stacks / "prod.vars.json").write_text('{"env": "prod", "nodes": "4"}')
    files = ("stacks/train.yaml", "stacks/staging.yaml", "stacks/prod.vars.json")
    got = infra("validate", "--json", *files, cwd=tmp_path)
    doc = json.loads(got.stdout)
    assert (doc["format_version"], doc["stack_count"], doc["variables_file_count"]) == ("1.1", 1, 2), doc
    got = infra("validate", *files, cwd=tmp_path)
    assert got.returncode == 0 and "1 stack file(s) and 2 variables file(s) valid: 0 error(s)" in got.stderr, got.stderr
    alone = infra("validate", "stacks/staging.yaml", cwd=tmp_path)   # the hook with only a variables file changed
    assert "\n1 variables file(s) valid: 0 error(s)" in alone.stderr and "stack file" not in alone.stderr, alone.stderr
    (stacks / "lost.vars.yaml").write_text("colour: blue\n")   # named as one, matching no stack: still not a stack
    lost = json.loads(infra("validate", "--json", "stacks/train.yaml", "stacks/lost.vars.yaml", cwd=tmp_path).stdout)
    assert (lost["stack_count"], lost["variables_file_count"], lost["valid"]) == (1, 1, False), lost


def test_a_variables_files_values_are_checked_naming_the_file_and_never_a_secret(tmp_path):
    stacks = project(tmp_path)
    (stacks / "qa.vars.yaml").write_text(f"env: qa\nnodes: four\nadmin_password: '{SECRET}'\n")
    (stacks / "lost.vars.yaml").write_text("colour: blue\n")
    got = infra("validate", "stacks/qa.vars.yaml", "stacks/lost.vars.yaml", cwd=tmp_path)
    assert got.returncode == 1
    assert "stacks/qa.vars.yaml:1:6: error[variable.not-allowed]" in got.stderr
    assert "stacks/qa.vars.yaml:2:8: error[variable.type]: var file stacks/qa.vars.yaml: variable 'nodes'" in got.stderr
    assert "stacks/lost.vars.yaml:1:1: error[variable.file]" in got.stderr and "(colour)" in got.stderr
    assert SECRET not in got.stdout + got.stderr and "add `stack:`" not in got.stderr


def test_a_var_files_text_converts_to_the_declared_type_as_a_var_does(tmp_path):
    (tmp_path / "v.json").write_text('{"nodes": "4", "spot": "true"}')
    (tmp_path / "bad.json").write_text('{"nodes": "4x"}')
    stack, source = parse_stack(STACK, "stack.yaml", {"INFRA_VAR_admin_password": SECRET},
                                Inputs((VarInput("var-file", str(tmp_path / "v.json")),)))
    assert source.variables["nodes"].value == 4 and source.variables["spot"].value is True
    with pytest.raises(DiagnosticError) as exc:
        parse_stack(STACK, "stack.yaml", {"INFRA_VAR_admin_password": SECRET},
                    Inputs((VarInput("var-file", str(tmp_path / "bad.json")),)))
    (d,) = exc.value.diagnostics
    assert d.rule == "variable.type" and d.file == str(tmp_path / "bad.json") and "'nodes'" in d.message


def test_one_bad_value_is_one_error_naming_the_var_it_came_from(tmp_path):
    stacks = project(tmp_path)
    got = infra("validate", "stacks/train.yaml", "--var", "nodes=2.5", cwd=tmp_path)
    errors = [line for line in got.stderr.splitlines() if "error[" in line]
    assert len(errors) == 1, got.stderr   # not a second "the stack has no cluster.a100" at the output
    assert "max_instances" in errors[0] and "from --var nodes" in errors[0]
    bad = STACK.replace("tier: dedicated", "tier: dedicated\n    infiniband: yes")
    (stacks / "train.yaml").write_text(bad + 'outputs:\n  c: {value: "${cluster.a100.name}"}\n')
    got = infra("validate", "stacks/train.yaml", cwd=tmp_path)
    assert [line for line in got.stderr.splitlines() if "error[" in line] == [
        "stacks/train.yaml:17:17: error[stack.invalid]: clusters.a100.infiniband: Input should be 'required' or "
        "'optional' (got True)"], got.stderr
    assert "YAML reads yes/no/on/off/true/false as a boolean" in got.stderr


def test_output_state_list_and_show_need_no_secret_they_do_not_use_plan_still_does(tmp_path):
    """On the local emulator: staging applied with its secret; then, without it, `output`, `state list` and `show`
    read the stack (its name and workspace use no secret), and plan still refuses with variable.missing."""
    stack = project(tmp_path) / "train.yaml"
    local = {"INFRA_LOCAL_DIR": str(tmp_path / "state")}
    done = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", cwd=tmp_path,
                 env={**local, "INFRA_VAR_admin_password": SECRET})
    assert done.returncode == 0, done.stdout + done.stderr
    listed = infra("state", "list", str(stack), "--local", cwd=tmp_path, env=local)
    assert listed.returncode == 0 and listed.stdout == "cluster.a100\n", listed.stdout + listed.stderr
    shown = infra("show", str(stack), "--json", "--local", cwd=tmp_path, env=local)
    assert shown.returncode == 0 and json.loads(shown.stdout)["stack"] == "train-staging", shown.stderr
    out = infra("output", str(stack), "--json", "--local", cwd=tmp_path, env=local)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["cluster_name"]["value"] == "a100"
    assert "variable" not in out.stderr + listed.stderr + shown.stderr   # nothing said of a variable not used
    plan = infra("plan", str(stack), "--local", cwd=tmp_path, env=local)
    assert plan.returncode == 1 and "error[variable.missing]" in plan.stderr and "admin_password" in plan.stderr
    # a workspace built from an unset variable: the read-only command needs it, and says which
    needy = tmp_path / "needy.yaml"
    needy.write_text(WITH_OUTPUT.replace("default: staging, ", ""))
    refused = infra("state", "list", str(needy), "--local", cwd=tmp_path, env=local)
    assert refused.returncode == 1 and "error[variable.missing]" in refused.stderr, refused.stderr
    assert "`infra state list" in refused.stderr and "needs it: stack, workspace.name" in refused.stderr
    assert "'admin_password'" not in refused.stderr
    everything = "".join(r.stdout + r.stderr for r in (done, listed, shown, out, plan, refused))
    assert SECRET not in everything


def test_an_error_at_a_value_from_the_environment_names_the_environment_variable():
    from infra_cli.stack.load import SchemaErrors

    with pytest.raises(SchemaErrors) as exc:
        parse_stack(STACK, "stack.yaml", {"INFRA_VAR_admin_password": SECRET, "INFRA_VAR_nodes": "2.5"}, Inputs())
    (d,) = exc.value.diagnostics
    assert d.file == "stack.yaml" and d.line == 15 and "(got 2.5, from INFRA_VAR_nodes)" in d.message, d.format()


def test_a_rules_error_at_a_value_a_var_gave_names_the_var(tmp_path):
    text = STACK.replace("size: Standard_ND96asr_v4", "size: ${var.size}").replace(
        "variables:\n", "variables:\n  size: {type: string, default: Standard_ND96asr_v4}\n")
    (tmp_path / "s.yaml").write_text(text)
    given = Inputs((VarInput("var", "size=not-a-size"),), unset_unknown=True)
    found = [d for d in validate_files([tmp_path / "s.yaml"], given) if d.severity == "error"]
    assert found and all(d.message.endswith("(from --var size)") and d.line == 15 for d in found), \
        [d.format() for d in found]
    assert not [d for d in validate_files([tmp_path / "s.yaml"], Inputs(unset_unknown=True)) if "(from " in d.message]   # a default: the stack's own line
