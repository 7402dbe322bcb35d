"""`infra plan --policy` (issue 44): Rego policies with conftest's conventions on the plan JSON, run by the CLI on the
local Azure. A deny is an error (exit 1, apply refuses), a warn a warning (the exit code as it was), a broken policy
an error at its line; the stack's `policy/` folder applies without the flag and `--policy none` turns it off;
sensitive values reach policies redacted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emulator_fixtures import WORKSPACE_YAML

ROOT = Path(__file__).resolve().parent.parent
SECRET = "s3cr3t-Tag-Value-8d1f"


def stack_text(max_instances: int = 2, tags: str = "{owner: ml-platform}") -> str:
    return (f"stack: pol\n{WORKSPACE_YAML}variables:\n  token: {{sensitive: true}}\n"
            f"clusters:\n  gpu: {{size: Standard_NC4as_T4_v3, max_instances: {max_instances}, tags: {tags}}}\n")


MAX_NODES = """package main

import rego.v1

deny contains msg if {
\tsome rc in input.resource_changes
\trc.type == "cluster"
\trc.change.after.max_instances > 8
\tmsg := sprintf("%s asks for %d nodes", [rc.address, rc.change.after.max_instances])
}
"""

OWNER_WARN = """package main

warn contains {"msg": sprintf("%s has no cost-center tag", [rc.address])} if {
  some rc in input.resource_changes
  not rc.change.after.tags["cost-center"]
}
"""


def infra(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {**os.environ, "INFRA_LOCAL_DIR": str(cwd / "state")}
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**base, **(env or {}), "INFRA_VAR_token": SECRET})


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()     # the stack's project: a git work tree
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "stack.yaml").write_text(stack_text())
    return tmp_path


def _policy(folder: Path, name: str, text: str) -> Path:
    """Write the policy; its path from the project's top (the current directory of the commands), as diagnostics
    name it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return (folder / name).relative_to(folder.parent)


def test_a_deny_makes_the_plan_exit_1_naming_the_policy_and_its_message(project):
    (project / "infra" / "stack.yaml").write_text(stack_text(max_instances=16))
    policy = _policy(project / "rules", "nodes.rego", MAX_NODES)
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), "--detailed-exitcode", cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{policy}:5:1: error[policy.main.deny]: cluster.gpu asks for 16 nodes" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert "Not applicable until the error is fixed" in done.stdout   # no "Plan:" count of what apply would do
    # the same plan under 8 nodes passes the same policy
    (project / "infra" / "stack.yaml").write_text(stack_text(max_instances=4))
    ok = infra("plan", "infra/stack.yaml", "--local", "-policy=" + str(policy), "--detailed-exitcode", cwd=project)
    assert ok.returncode == 2 and "policy." not in ok.stderr, ok.stderr


def test_a_warn_leaves_the_exit_code_and_shows_the_warning(project):
    policy = _policy(project / "rules", "tags.rego", OWNER_WARN)
    for flags, code in (([], 0), (["--detailed-exitcode"], 2)):
        done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), *flags, cwd=project)
        assert done.returncode == code, done.stderr
        assert f"{policy}:3:1: warning[policy.main.warn]: cluster.gpu has no cost-center tag" in done.stderr
    as_json = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), "--json", cwd=project)
    document = json.loads(as_json.stdout)
    [found] = [d for d in document["diagnostics"] if d["rule"].startswith("policy.")]
    assert found == {"severity": "warning", "rule": "policy.main.warn", "message": "cluster.gpu has no cost-center tag",
                     "file": str(policy), "line": 3, "column": 1, "hint": found["hint"]}


def test_a_broken_policy_is_an_error_at_its_line(project):
    broken = _policy(project / "rules", "broken.rego", "package main\n\ndeny contains msg if {\n  msg := \n}\n")
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", "rules", cwd=project)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert re.search(rf"{re.escape(str(broken))}:4:\d+: error\[policy\.invalid\]: Rego: ", done.stderr), done.stderr
    unknown = _policy(project / "other", "unknown.rego", 'package main\n\ndeny contains "x" if {\n  nosuch(1)\n}\n')
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(unknown), cwd=project)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{unknown}:4:1: error[policy.error]: evaluating package main failed: Function not found: nosuch" \
        in done.stderr, done.stderr


def test_the_projects_policy_folder_applies_without_the_flag_and_none_turns_it_off(project):
    (project / "infra" / "stack.yaml").write_text(stack_text(max_instances=16))
    _policy(project / "policy", "nodes.rego", MAX_NODES)   # at the project's top, above the stack's folder
    done = infra("plan", "infra/stack.yaml", "--local", cwd=project)
    assert done.returncode == 1 and "policy/nodes.rego:5:1: error[policy.main.deny]" in done.stderr, done.stderr
    off = infra("plan", "infra/stack.yaml", "--local", "--policy", "none", cwd=project)
    assert off.returncode == 0 and "policy." not in off.stderr, off.stderr
    # apply judges the plan it would make by the same folder, and refuses a deny
    refused = infra("apply", "infra/stack.yaml", "--local", "--auto-approve", "--no-smoke", cwd=project)
    assert refused.returncode == 1 and "error[policy.main.deny]" in refused.stderr
    assert "Apply refused" in refused.stderr and "Apply complete" not in refused.stdout
    # a folder above the project's top is not the project's
    (project / "policy" / "nodes.rego").rename(project / "nodes.rego")
    inner = project / "inner"
    (inner / ".git").mkdir(parents=True)
    (inner / "stack.yaml").write_text(stack_text(max_instances=16))
    _policy(project / "policy", "nodes.rego", MAX_NODES)
    assert infra("plan", "inner/stack.yaml", "--local", cwd=project).returncode == 0


def test_namespace_names_another_package(project):
    (project / "infra" / "stack.yaml").write_text(stack_text(max_instances=16))
    policy = _policy(project / "rules", "team.rego", MAX_NODES.replace("package main", "package team.gpu"))
    quiet = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), cwd=project)
    assert quiet.returncode == 0 and "warning[policy.no-package]: no policy declares package main" in quiet.stderr
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), "--namespace", "team.gpu", cwd=project)
    assert done.returncode == 1 and "error[policy.team.gpu.deny]: cluster.gpu asks for 16 nodes" in done.stderr
    bad = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), "--namespace", "x; y", cwd=project)
    assert bad.returncode == 1 and "error[policy.namespace]" in bad.stderr


def test_conftest_rule_forms_deny_violation_prefixes_and_rego_v0(project):
    policy = _policy(project / "rules", "forms.rego", """package main

violation contains {"msg": "a violation", "details": {"x": 1}} if { true }

deny_tagless[msg] {
  input.stack == "pol"
  msg := "a v0-style partial set"
}

warn_costly contains msg if { msg := "a prefixed warning" }

helper := 1
""")
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), cwd=project)
    assert done.returncode == 1, done.stderr
    assert f"{policy}:3:1: error[policy.main.violation]: a violation" in done.stderr
    assert f"{policy}:5:1: error[policy.main.deny_tagless]: a v0-style partial set" in done.stderr
    assert f"{policy}:10:1: warning[policy.main.warn_costly]: a prefixed warning" in done.stderr
    assert "helper" not in done.stderr


def test_sensitive_values_reach_policies_redacted(project):
    (project / "infra" / "stack.yaml").write_text(stack_text(tags="{owner: ml, token: '${var.token}'}"))
    policy = _policy(project / "rules", "leak.rego", f"""package main

import rego.v1

deny contains "the policy saw the clear secret" if {{
\tsome path, value in walk(input)
\tis_string(value)
\tcontains(value, "{SECRET}")
}}

warn contains msg if {{
\tsome rc in input.resource_changes
\tmsg := sprintf("token tag: %s; declared: %s", [rc.change.after.tags.token, input.configuration.clusters.gpu.tags.token])
}}
""")
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), cwd=project)
    assert done.returncode == 0, done.stderr
    assert "token tag: (sensitive value); declared: (sensitive value)" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_policies_see_none_of_the_environment(project):
    """opa.runtime().env would hand a policy the INFRA_VAR_* values, Azure's credentials and INFRA_PLAN_KEY."""
    policy = _policy(project / "rules", "env.rego", "package main\n\nwarn contains json.marshal(opa.runtime().env) if { true }\n")
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), cwd=project,
                 env={"AZURE_CLIENT_SECRET": "azure-" + SECRET, "INFRA_PLAN_KEY": "k" * 32})
    assert done.returncode == 0 and "warning[policy.main.warn]" in done.stderr, done.stderr
    assert SECRET not in done.stderr and "INFRA_PLAN_KEY" not in done.stderr and "INFRA_VAR" not in done.stderr


def test_without_regopy_the_plan_says_what_to_install(project, tmp_path):
    policy = _policy(project / "rules", "nodes.rego", MAX_NODES)
    (tmp_path / "hide" / "regopy").mkdir(parents=True)   # a Python where `import regopy` fails, as where it is absent
    (tmp_path / "hide" / "regopy" / "__init__.py").write_text("raise ImportError(\"No module named 'regopy'\")\n")
    env = {"PYTHONPATH": str(tmp_path / "hide")}
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), cwd=project, env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error[policy.regopy-missing]" in done.stderr and "pip install 'infra-cli[policy]'" in done.stderr


def test_a_missing_policy_path_is_an_error(project):
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", "nope/", cwd=project)
    assert done.returncode == 1 and "error[policy.not-found]: no such policy file or folder: nope/" in done.stderr
    mixed = infra("plan", "infra/stack.yaml", "--local", "--policy", "none", "--policy", "x.rego", cwd=project)
    assert mixed.returncode == 1 and "error[policy.none-with-paths]" in mixed.stderr


def test_a_message_formatted_from_a_computed_string_is_read(project):
    """rego-cpp 1.5 leaves the quotes of a computed string formatted by sprintf unescaped in its JSON answer
    (policy_worker._loads reads them as part of the string)."""
    policy = _policy(project / "rules", "fmt.rego", 'package main\n\nimport rego.v1\n\n'
                     'deny contains sprintf("sizes (%s) and \\"%s\\"", [concat(", ", ["a", "b"]), input.stack]) if { true }\n')
    done = infra("plan", "infra/stack.yaml", "--local", "--policy", str(policy), cwd=project)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.search(r'error\[policy\.main\.deny\]: sizes \("?a, b"?\) and "pol"\n', done.stderr), done.stderr
