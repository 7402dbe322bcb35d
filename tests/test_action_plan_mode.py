"""The Action's validate and plan modes (issue 44), and the example workflows of docs/examples/workflows/ that use
it, run as the Actions runner runs them (tests/actions_runner.py) on the package the Action installs, against the
local Azure (a running emulator, as a job's signed-in Azure): the Markdown plan in the job summary, the outputs
exitcode and plan, the step failing on an error or a policy's deny; the nightly drift check failing on a change made
outside infra. Inputs reach the scripts as environment variables only."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from actions_runner import Runner, expand
from emulator_fixtures import WORKSPACE_YAML
from installed_fixtures import BARE_PATH, ROOT, make_venv, tracked_tree

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
WORKFLOWS = ROOT / "docs" / "examples" / "workflows"
USES = re.compile(r"^OWNER/infra@v[0-9]")
STACK = f"""stack: ci
{WORKSPACE_YAML}clusters:
  gpu: {{size: Standard_NC4as_T4_v3, max_instances: 2, tags: {{owner: ml-platform}}}}
"""
NODES = (ROOT / "docs" / "examples" / "policy" / "max_instances.rego").read_text()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """The action's checkout and a venv with what its install steps installed (infra, and its policy extra)."""
    tmp = tmp_path_factory.mktemp("action")
    action_path = tracked_tree(tmp / "action")
    venv = make_venv(tmp / "venv")
    workspace = tmp / "workspace"
    workspace.mkdir()
    runner = Runner(ACTION, action_path, venv, workspace, BARE_PATH)
    for name in ("Install infra", "Install infra's policy support"):
        step = next(s for s in ACTION["runs"]["steps"] if s.get("name") == name)
        env = {k: expand(str(v), runner.github) for k, v in (step.get("env") or {}).items()}
        done = runner._shell(step["run"], env, tmp / "out")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert shutil.which("infra", path=runner.path) == str(venv / "bin" / "infra")
    return action_path, venv


@pytest.fixture
def project(tmp_path) -> Path:
    """The job's checkout: a git work tree with the stack under infra/ and the team's policies under policy/."""
    project = tmp_path / "repo"
    (project / "infra").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / "infra" / "stack.yaml").write_text(STACK)
    (project / "policy").mkdir()
    (project / "policy" / "max_instances.rego").write_text(NODES)
    return project


def runner_for(installed, project: Path, emulator, **github: str) -> Runner:
    action_path, venv = installed
    # the job's environment: infra's --local points at the running emulator (the job's "Azure")
    job_env = {"INFRA_EMULATOR_URL": emulator.url, "INFRA_LOCAL_DIR": str(emulator.state_dir)}
    return Runner(ACTION, action_path, venv, project, BARE_PATH, job_env=job_env, github=github)


def shim_gh(project: Path) -> Path:
    """`gh` as the job finds it on PATH: records its arguments and the comment's body (no network here)."""
    bin_ = project.parent / "bin"
    bin_.mkdir(exist_ok=True)
    record = project.parent / "gh-calls"
    (bin_ / "gh").write_text(f"#!/bin/bash\nprintf '%s\\n' \"$*\" >> '{record}'\n"
                             f"for ((i=1;i<=$#;i++)); do [ \"${{!i}}\" = --body-file ] && j=$((i+1)) && "
                             f"cp \"${{!j}}\" '{record}.body'; done\nexit 0\n")
    (bin_ / "gh").chmod(0o755)
    return bin_


def workflow(name: str) -> tuple[dict, str]:
    document = yaml.safe_load((WORKFLOWS / name).read_text())
    [job] = document["jobs"].values()
    [uses] = [s["uses"] for s in job["steps"] if USES.match(s.get("uses", ""))]
    return job, uses


def test_the_workflows_pin_the_release_and_pass_no_input_into_a_script():
    from infra_cli import __version__

    for name in ("pull-request.yml", "drift.yml"):
        _, uses = workflow(name)
        assert uses == f"OWNER/infra@v{__version__}"
    for step in ACTION["runs"]["steps"]:   # inputs come as env, only github.action_path is spliced into run
        assert set(re.findall(r"\$\{\{\s*([^}]*?)\s*\}\}", step["run"])) <= {"github.action_path"}, step["run"]


def test_pull_request_workflow_plans_summarises_comments_and_keeps_the_plan(installed, project, emulator):
    job, uses = workflow("pull-request.yml")
    runner = runner_for(installed, project, emulator, **{"github.event.pull_request.number": "17"})
    runner.path = f"{shim_gh(project)}:{runner.path}"
    done = runner.run_job(job, action_uses=uses, overrides={"local": "true"})
    assert done.status == "success", done.log
    plan_step = done.step("infra plan")
    assert plan_step.outputs["exitcode"] == "2"     # changes: a cluster to create
    assert plan_step.outputs["plan"] == "infra.plan" and (project / "infra.plan").is_file()
    assert "**Plan: 1 to add, 0 to change, 0 to destroy.**" in done.summary
    assert "| + create | <code>cluster.gpu</code> |" in done.summary and "<details>" in done.summary
    # the comment carries the same Markdown; the artifact step is another action's (not run here)
    body = (project.parent / "gh-calls.body").read_text()
    assert body == (project / plan_step.outputs["markdown"]).read_text() and body.strip() in done.summary
    assert (project.parent / "gh-calls").read_text().startswith("pr comment 17 --body-file infra-plan.md")
    shown = subprocess.run([str(installed[1] / "bin" / "infra"), "show", "infra.plan"], cwd=project,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "cluster.gpu will be created" in shown.stdout, shown.stderr


def test_a_deny_fails_the_plan_step_and_the_summary_says_why(installed, project, emulator):
    (project / "infra" / "stack.yaml").write_text(STACK.replace("max_instances: 2", "max_instances: 12"))
    job, uses = workflow("pull-request.yml")
    runner = runner_for(installed, project, emulator, **{"github.event.pull_request.number": "18"})
    runner.path = f"{shim_gh(project)}:{runner.path}"
    done = runner.run_job(job, action_uses=uses, overrides={"local": "true"})
    assert done.status == "failure"
    plan_step = done.step("infra plan")
    assert plan_step.returncode == 1 and plan_step.outputs["exitcode"] == "1" and not plan_step.outputs["plan"]
    assert "#### Policy results (1)" in done.summary
    assert "cluster.gpu asks for max\\_instances 12" in done.summary       # escaped Markdown of the deny
    assert "error[policy.main.deny]" in done.step("action: Plan the stack").log
    assert done.step("Comment the plan on the pull request").ran        # always(): the author sees why
    assert not done.step("Keep the plan for apply").ran


def test_nightly_drift_fails_on_a_change_made_outside_infra(installed, project, emulator, clients):
    runner = runner_for(installed, project, emulator)
    applied = subprocess.run([str(installed[1] / "bin" / "infra"), "apply", "infra/stack.yaml", "--local",
                              "--auto-approve", "--no-smoke"], cwd=project, capture_output=True, text=True,
                             timeout=300, env={**runner.job_env, "PATH": runner.path})
    assert applied.returncode == 0, applied.stdout + applied.stderr
    job, uses = workflow("drift.yml")
    quiet = runner.run_job(job, action_uses=uses, overrides={"local": "true"})
    assert quiet.status == "success" and quiet.step("infra plan -refresh-only").outputs["exitcode"] == "0", quiet.log
    assert not quiet.step("Fail on drift").ran
    entity = clients.ml.compute.get("gpu")       # someone scales the cluster in the portal
    entity.max_instances = 3
    entity.network_settings = None
    clients.ml.compute.begin_create_or_update(entity).result()
    project.parent.joinpath(f"{project.name}-summary.md").unlink()
    drifted = runner.run_job(job, action_uses=uses, overrides={"local": "true"})
    assert drifted.status == "failure" and drifted.step("infra plan -refresh-only").outputs["exitcode"] == "2"
    assert drifted.step("Fail on drift").ran and "objects changed outside infra" in drifted.step("Fail on drift").log
    assert "**Drift: 1 object changed outside of infra.**" in drifted.summary
    assert "<code>max\\_instances</code>: <code>2</code> → <code>3</code>" in drifted.summary


def test_validate_mode_sets_the_exit_code_and_fails_on_errors(installed, project, emulator):
    runner = runner_for(installed, project, emulator)
    from actions_runner import Job

    job = Job()
    status, outputs = runner.run_action({"command": "validate", "stack": "infra/stack.yaml\n"}, job)
    assert status == "success" and outputs["exitcode"] == "0" and "infra validate: valid" in runner.summary.read_text()
    (project / "infra" / "bad.yaml").write_text(STACK.replace("Standard_NC4as_T4_v3", "Standard_Nope"))
    status, outputs = runner.run_action({"command": "validate", "stack": "infra/stack.yaml\ninfra/bad.yaml"}, job)
    assert status == "failure" and outputs["exitcode"] == "1"
    assert "infra/bad.yaml" in runner.summary.read_text()


def test_unknown_command_and_hostile_inputs(installed, project, emulator):
    runner = runner_for(installed, project, emulator)
    from actions_runner import Job

    job = Job()
    status, _ = runner.run_action({"command": "pwn"}, job)
    assert status == "failure" and "unknown command 'pwn'" in job.log
    marker = project.parent / "pwned"
    hostile = {"stack": f'x.yaml"; touch {marker}; echo "', "var-files": f"$(touch {marker})",
               "policy": f"`touch {marker}`"}
    status, outputs = runner.run_action({"command": "plan", "local": "true", **hostile}, job)
    assert status == "failure" and not marker.exists()
    # a plan file name cannot add a line (an output of its own) to GITHUB_OUTPUT
    status, outputs = runner.run_action({"command": "plan", "local": "true", "stack": "infra/stack.yaml",
                                         "plan-file": "p.plan\ninjected=1"}, job)
    plan_step = [s for s in job.steps if s.name == "action: Plan the stack"][-1]
    assert status == "failure" and "injected" not in plan_step.outputs, plan_step.outputs
    assert "plan-file names one file" in plan_step.log


def test_a_sensitive_variable_reaches_the_plan_from_the_jobs_environment_and_never_its_outputs(installed, project,
                                                                                            emulator):
    # issue 43 walk: the README's admin password in the Action's plan mode. The Action has no input for a secret:
    # it comes from the job's environment (INFRA_VAR_NAME, set from the repository's secrets); the plan runs, and
    # the summary, the comment, the step's log and the saved plan never hold it. Without it the step fails saying
    # where to set it.
    secret = "Act10n-Secret-Value!"
    (project / "infra" / "stack.yaml").write_text(
        "variables:\n  admin_password: {type: string, sensitive: true}\n" + STACK +
        "  dbg:\n    size: Standard_NC4as_T4_v3\n    max_instances: 1\n    ssh_public_access_enabled: true\n"
        "    ssh_settings:\n      admin_username: azureuser\n      admin_password: ${var.admin_password}\n")
    job, uses = workflow("pull-request.yml")
    runner = runner_for(installed, project, emulator, **{"github.event.pull_request.number": "19"})
    runner.path = f"{shim_gh(project)}:{runner.path}"
    runner.job_env["INFRA_VAR_admin_password"] = secret
    done = runner.run_job(job, action_uses=uses, overrides={"local": "true"})
    assert done.status == "success", done.log
    assert done.step("infra plan").outputs["exitcode"] == "2" and "<code>cluster.dbg</code>" in done.summary
    kept = [done.summary, done.log, (project / "infra-plan.md").read_text(), (project.parent / "gh-calls.body").read_text()]
    assert not [text for text in kept if secret in text]
    assert secret.encode() not in (project / "infra.plan").read_bytes()
    del runner.job_env["INFRA_VAR_admin_password"]
    (project / "infra.plan").unlink()
    failed = runner.run_job(job, action_uses=uses, overrides={"local": "true"})
    assert failed.status == "failure" and failed.step("infra plan").outputs["exitcode"] == "1"
    assert "error[variable.missing]: variable 'admin_password'" in failed.summary
    assert "INFRA_VAR_admin_password" in failed.summary and "env:" in failed.summary, failed.summary
