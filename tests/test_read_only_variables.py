"""Commands that read or write only the state need only the variables of what they read (issue 43), as
Terraform's `output` needs none: `output NAME` the variables output NAME is built from, `state list`/`show`
the stack's name and workspace, `state rm`/`import` those and the one resource they write, `force-unlock` where
the lock is. A required sensitive variable used only by another cluster's admin password blocks none of them;
plan and apply still require every variable. On the local emulator, through the CLI, two workspaces of one stack."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import parse_stack
from infra_cli.stack.variables import Inputs, needs_path

from test_variables import STACK as STAGING_OR_PROD

ROOT = Path(__file__).resolve().parent.parent
# the stack's name and workspace built from `env`: train-staging in mlw-staging, train-prod in mlw-prod
NAME_AND_WORKSPACE = STAGING_OR_PROD[STAGING_OR_PROD.index("stack:"):STAGING_OR_PROD.index("clusters:")]
SECRETS = {"staging": "Stag1ng-Adm1n-Secret!", "prod": "Pr0d-Adm1n-Secret-xyz!"}
STACK = """\
variables:
  env: {type: string, allowed: [staging, prod]}
  admin_password: {type: string, sensitive: true}
  label: {type: string}
""" + NAME_AND_WORKSPACE + """\
clusters:
  a100:
    size: Standard_ND96asr_v4
    max_instances: 1
    ssh_settings:
      admin_username: azureuser
      admin_password: ${var.admin_password}
  spare:
    size: Standard_ND96asr_v4
    max_instances: 1
outputs:
  spare_id: {value: "${cluster.spare.id}"}
  labelled: {value: "${var.label}/${cluster.a100.name}"}
"""


def infra(*args: str, state: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_VAR_")}
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**environ, "INFRA_LOCAL_DIR": str(state), **(env or {})}, timeout=300)


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def refused_for(done: subprocess.CompletedProcess, variable: str, command: str, built: str) -> None:
    """A refusal that names the variable, the command that needs it, what is built from it and how to set it."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error[variable.missing]" in done.stderr and f"variable {variable!r} has no value" in done.stderr
    assert re.search(f"`infra {command}( --local)?` needs it: {re.escape(built)} (is|are) built from it", done.stderr), \
        done.stderr
    assert f"INFRA_VAR_{variable}" in done.stderr
    if variable == "admin_password":   # a secret: the environment only, never a file or the shell's history
        assert "it is sensitive" in done.stderr and "--var admin_password" not in done.stderr
    else:
        assert f"--var {variable}=VALUE" in done.stderr and "--var-file" in done.stderr


@pytest.fixture(scope="module")
def applied(tmp_path_factory):
    """Staging and prod applied, each with its own admin password and label."""
    tmp = tmp_path_factory.mktemp("two-workspaces")
    stack, state = tmp / "train.yaml", tmp / "state"
    stack.write_text(STACK)
    for env in ("staging", "prod"):
        ok(infra("apply", str(stack), "--var", f"env={env}", "--var", f"label=L-{env}", "--auto-approve", "--local",
                 "--no-smoke", state=state, env={"INFRA_VAR_admin_password": SECRETS[env]}))
    return stack, state


def test_output_needs_only_the_variables_its_output_is_built_from(applied):
    stack, state = applied
    prod = ("--var", "env=prod", "--local")
    one = ok(infra("output", str(stack), "spare_id", "--raw", *prod, state=state))
    assert one.stdout.rstrip("\n").endswith("/workspaces/mlw-prod/computes/spare"), one.stdout
    assert one.stderr == ""
    # `labelled` is built from `label`: asked for by name, it is refused naming the variable and how to set it
    refused_for(infra("output", str(stack), "labelled", *prod, state=state), "label", "output", "outputs.labelled.value")
    given = ok(infra("output", str(stack), "labelled", "--raw", *prod, "--var", "label=L-prod", state=state))
    assert given.stdout == "L-prod/a100\n"
    # all of them: Terraform's `output` reads recorded values; infra evaluates outputs from the live state, so the
    # one built from an unset variable is left out, with a warning naming it and how to set it, and the rest shown
    every = ok(infra("output", str(stack), "--json", *prod, state=state))
    assert set(json.loads(every.stdout)) == {"spare_id"}
    assert "warning[output.left-out]: output 'labelled' is left out: variable 'label' has no value" in every.stderr
    assert "--var label=VALUE" in every.stderr and "INFRA_VAR_label" in every.stderr
    assert "admin_password" not in every.stderr
    both = ok(infra("output", str(stack), "--json", *prod, "--var", "label=L-prod", state=state))
    assert set(json.loads(both.stdout)) == {"spare_id", "labelled"} and both.stderr == ""
    assert not any(s in one.stdout + every.stdout + both.stdout for s in SECRETS.values())


def test_state_list_show_and_force_unlock_need_no_secret(applied):
    stack, state = applied
    for env in ("staging", "prod"):
        given = ("--var", f"env={env}", "--local")
        assert ok(infra("state", "list", str(stack), *given, state=state)).stdout == "cluster.a100\ncluster.spare\n"
        shown = json.loads(ok(infra("show", str(stack), "--json", *given, state=state)).stdout)
        assert shown["stack"] == f"train-{env}"
        unlocked = ok(infra("force-unlock", str(stack), *given, state=state))
        assert unlocked.stdout == "The stack was not locked.\n" and "variable" not in unlocked.stderr
    # the stack's name and workspace are built from `env`: where the state is, so it is needed, and named
    refused_for(infra("state", "list", str(stack), "--local", state=state), "env", "state list",
                "stack, workspace.name, workspace.resource_group")
    refused_for(infra("force-unlock", str(stack), "--local", state=state), "env", "force-unlock",
                "stack, workspace.name, workspace.resource_group")


def test_state_rm_and_import_need_only_the_resource_they_write(applied):
    stack, state = applied
    prod = ("--var", "env=prod", "--local")
    removed = ok(infra("state", "rm", "cluster.spare", str(stack), *prod, state=state))
    assert "Removed cluster.spare from stack 'train-prod'" in removed.stdout
    assert ok(infra("state", "list", str(stack), *prod, state=state)).stdout == "cluster.a100\n"
    adopted = ok(infra("import", "cluster.spare", "spare", str(stack), *prod, state=state))
    assert "Imported spare as cluster.spare" in adopted.stdout
    assert ok(infra("state", "list", str(stack), *prod, state=state)).stdout == "cluster.a100\ncluster.spare\n"
    # staging untouched: its spare was never forgotten
    assert ok(infra("state", "list", str(stack), "--var", "env=staging", "--local", state=state)).stdout == \
        "cluster.a100\ncluster.spare\n"
    # the cluster whose admin password it is: its PUT sends the password back (Azure refuses other credentials),
    # so state rm of it needs the variable, and says so, with nothing written
    refused_for(infra("state", "rm", "cluster.a100", str(stack), *prod, state=state), "admin_password",
                "state rm", "clusters.a100.ssh_settings.admin_password")
    assert ok(infra("state", "list", str(stack), *prod, state=state)).stdout == "cluster.a100\ncluster.spare\n"
    # and import of it: the tag it writes records the password's digest (a placeholder's would read as changed)
    password = {"INFRA_VAR_admin_password": SECRETS["prod"]}
    ok(infra("state", "rm", "cluster.a100", str(stack), *prod, state=state, env=password))
    refused_for(infra("import", "cluster.a100", "a100", str(stack), *prod, state=state), "admin_password",
                "import", "clusters.a100.ssh_settings.admin_password")
    assert ok(infra("state", "list", str(stack), *prod, state=state)).stdout == "cluster.spare\n"
    ok(infra("import", "cluster.a100", "a100", str(stack), *prod, state=state, env=password))
    everything = removed.stdout + removed.stderr + adopted.stdout + adopted.stderr
    assert not any(s in everything for s in SECRETS.values())


def test_plan_and_apply_still_require_every_variable(applied):
    stack, state = applied
    for command in (("plan", str(stack)), ("apply", str(stack), "--auto-approve", "--no-smoke")):
        done = infra(*command, "--var", "env=prod", "--var", "label=L-prod", "--local", state=state)
        assert done.returncode == 1 and "error[variable.missing]" in done.stderr, done.stdout + done.stderr
        assert "variable 'admin_password' has no value" in done.stderr and "INFRA_VAR_admin_password" in done.stderr
    planned = ok(infra("plan", str(stack), "--var", "env=prod", "--var", "label=L-prod", "--local", state=state,
                       env={"INFRA_VAR_admin_password": SECRETS["prod"]}))
    assert "No changes." in planned.stdout


def test_a_needed_path_matches_what_holds_it_and_any_key():
    needed = (("stack",), ("workspace",), ("environments", "*", "version"))
    assert needs_path(needed, ("environments", "train", "version"))
    assert needs_path(needed, ("environments",))   # `environments: ${var.all}` holds every version
    assert not needs_path(needed, ("environments", "train", "image"))
    assert not needs_path(needed, ("clusters", "a100", "ssh_settings", "admin_password"))
    assert needs_path((("clusters", "a100"),), ("clusters", "a100", "ssh_settings", "admin_password"))
    assert not needs_path((("clusters", "a100"),), ("clusters", "a1000", "size"))
    text = STACK + 'environments:\n  train: {image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04", ' \
        'version: "${var.v}"}\n'
    text = text.replace("variables:\n", "variables:\n  v: {type: string}\n")
    inputs = Inputs(unset_unknown=True, needed=needed, command="`infra state list`")
    with pytest.raises(DiagnosticError) as exc:   # which version the state reads is built from `v`
        parse_stack(text, "stack.yaml", {"INFRA_VAR_env": "prod"}, inputs)
    (d,) = exc.value.diagnostics
    assert "variable 'v' has no value" in d.message and "environments.train.version is built from it" in d.message
    stack, _ = parse_stack(text, "stack.yaml", {"INFRA_VAR_env": "prod", "INFRA_VAR_v": "3"}, inputs)
    assert stack.stack == "train-prod"   # admin_password and label: unset, not needed


def test_an_output_needs_its_own_text_and_an_environments_declaration_never_a_clusters(tmp_path):
    from infra_cli.plan.outputs import output_needs
    from infra_cli.stack.load import load_stack

    path = tmp_path / "train.yaml"
    path.write_text(STACK.replace("clusters:\n", "environments:\n  train: {image: \"mcr.microsoft.com/azureml/"
                                  "openmpi4.1.0-ubuntu22.04:${var.label}\"}\nclusters:\n")
                    + '  image: {value: "${environment.train.image} on ${cluster.a100.size}"}\n')
    loaded = load_stack(path, {"INFRA_VAR_env": "prod"},
                        Inputs(unset_unknown=True, needed=(("stack",), ("workspace",)), command="`infra output`"))
    assert output_needs(loaded, "spare_id") == (("outputs", "spare_id"),)   # a cluster's attributes: live
    assert output_needs(loaded, "image") == (("outputs", "image"), ("environments", "train"))
