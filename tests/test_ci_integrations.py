"""The reusable CI steps this repository offers, run the way their runners run them and on the package they
install, never on this checkout: action.yml (a composite GitHub Action: its install step pip-installs the
action's checkout, then its check step runs .github/image-check.sh) and .pre-commit-hooks.yaml (pre-commit
builds its own environment from the repository, through `try-repo` and through a config pinning a commit)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from image_fixtures import images, registry  # noqa: F401 (fixtures)
from installed_fixtures import BARE_PATH, ROOT, make_venv, tracked_tree

EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.invalid", "GIT_COMMITTER_NAME": "ci",
                "GIT_COMMITTER_EMAIL": "ci@example.invalid"}


def _git_repo(folder: Path) -> str:
    """Make `folder` a git repository with everything committed; its commit."""
    env = {**os.environ, **GIT_IDENTITY}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x", "--no-gpg-sign"]):
        subprocess.run(["git", "-C", str(folder), *args], check=True, env=env, capture_output=True)
    return subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


class Runner:
    """The Actions runner's view of this action: github.action_path is a checkout of the repository, steps run
    with the job's PATH (a python3 of the job's setup-python: here a venv's), inputs expanded into each step's env."""

    def __init__(self, action_path: Path, venv: Path):
        self.action_path, self.venv = action_path, venv
        self.path = f"{venv / 'bin'}{os.pathsep}{BARE_PATH}"

    def step(self, step: dict, inputs: dict, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
        context = {f"inputs.{k}": v for k, v in inputs.items()} | {"github.action_path": str(self.action_path)}

        def expand(text: str) -> str:
            return EXPRESSION.sub(lambda m: context[m.group(1)], text)

        env = {k: v for k, v in os.environ.items() if not k.startswith(("INFRA_", "PYTHON", "VIRTUAL_ENV"))}
        env.update({k: expand(str(v)) for k, v in (step.get("env") or {}).items()}, PATH=self.path, **extra)
        return subprocess.run([step["shell"], "-c", expand(step["run"])], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=600)


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Runner:
    """The action's install step, as the runner runs it (`uses: OWNER/infra@...` with install: true), into a venv
    that sees this interpreter's packages: pip builds and installs the action's checkout, non-editable."""
    tmp = tmp_path_factory.mktemp("action")
    action_path = tracked_tree(tmp / "action")
    runner = Runner(action_path, make_venv(tmp / "venv"))
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    install = next(s for s in ACTION["runs"]["steps"] if s.get("name") == "Install infra")
    assert EXPRESSION.search(install["if"]).group(1) == "inputs.install == 'true'" and inputs["install"] == "true"
    done = runner.step(install, inputs, tmp)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert shutil.which("infra", path=runner.path) == str(runner.venv / "bin" / "infra")
    return runner


def _run_action(runner: Runner, tmp_path: Path, **given: str) -> tuple[int, dict, str, str, str]:
    """Run action.yml's check step: inputs (defaults, then `given`), GITHUB_OUTPUT and GITHUB_STEP_SUMMARY set.
    Returns the exit code, the JSON verdict, the step outputs, the job summary and the step's log."""
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    unknown = set(given) - set(inputs)
    assert not unknown, f"not inputs of the action: {unknown}"
    inputs.update(given)
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "check")
    output, summary = tmp_path / "github_output", tmp_path / "summary.md"
    done = runner.step(step, inputs, tmp_path, GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary))
    json_path = tmp_path / inputs["json-output"]
    verdict = json.loads(json_path.read_text()) if json_path.exists() and json_path.read_text().strip() else {}
    return (done.returncode, verdict, output.read_text() if output.exists() else "",
            summary.read_text() if summary.exists() else "", done.stdout + done.stderr)


def test_action_passes_an_image_with_open_mpi_and_records_the_verdict(runner, images, tmp_path):
    code, verdict, outputs, summary, log = _run_action(runner, tmp_path, image=images.refs["openmpi"],
                                                        require="openmpi>=4.1\n\n mpi ")
    assert code == 0, log
    assert verdict and all(r["met"] for r in verdict["requirements"]), verdict
    assert [r["requirement"] for r in verdict["requirements"]] == ["openmpi>=4.1", "mpi"]
    assert "json=image-check.json" in outputs and "all requirements met" in summary
    assert re.search(r"PASS +openmpi>=4\.1 ", log), log   # the human verdict is in the step's log


def test_action_names_the_unmet_requirement_in_the_log_and_the_summary(runner, images, tmp_path):
    code, verdict, _, summary, log = _run_action(runner, tmp_path, image=images.refs["mpich"],
                                                 require="mpi\nopenmpi>=4.1")
    assert code == 1 and "NOT met" in summary
    assert [r["met"] for r in verdict["requirements"]] == [True, False]
    failed = re.search(r"FAIL +openmpi>=4\.1 +(\S.*)", log)
    assert failed, log                                     # which requirement, and why, in the log
    assert f"- not met: `openmpi>=4.1`: {failed.group(1).strip()}" in summary, summary
    assert "not met: `mpi`" not in summary
    assert re.search(r"PASS +mpi ", log) and "mpich" in log.lower()   # what was found instead
    # and what to do: the installed package carries the fix: knowledge (its os-release names no ID: every family)
    assert "  - fix: on Debian, Ubuntu: <code>apt-get update" in summary, summary
    assert verdict["requirements"][1]["fix"]["template"] == "openmpi-rdma" and "fix: " in log


def test_action_says_when_the_image_cannot_be_read(runner, tmp_path):
    code, verdict, _, summary, log = _run_action(runner, tmp_path, image=f"oci:{tmp_path / 'absent'}:x",
                                                 **{"json-output": "out.json"})
    assert code == 2 and "could not be read" in summary
    assert verdict["ok"] is False and verdict["errors"], verdict
    assert verdict["errors"][0]["message"] in log


def test_action_inputs_cannot_inject_commands(runner, tmp_path):
    marker = tmp_path / "pwned"
    code, *_ = _run_action(runner, tmp_path, image=f'x"; touch {marker}; echo "', require=f"openmpi\n$(touch {marker})")
    assert code != 0 and not marker.exists()


# ---- pre-commit -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str, dict]:
    """This repository as pre-commit fetches it (a git repository at a commit), and pre-commit's environment:
    its own cache, and hook environments that see this interpreter's packages (virtualenv's
    VIRTUALENV_SYSTEM_SITE_PACKAGES), so pre-commit's `pip install .` builds infra without downloading its
    dependencies."""
    tmp = tmp_path_factory.mktemp("pre-commit")
    repo = tracked_tree(tmp / "infra")
    commit = _git_repo(repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INFRA_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(GIT_IDENTITY, PRE_COMMIT_HOME=str(tmp / "cache"), VIRTUALENV_SYSTEM_SITE_PACKAGES="1")
    return repo, commit, env


def _user_repo(tmp_path: Path, stacks: dict[str, str], config: dict | None = None) -> Path:
    user = tmp_path / "user"
    for name, text in stacks.items():
        (user / "stacks" / name).parent.mkdir(parents=True, exist_ok=True)
        (user / "stacks" / name).write_text(text)
    if config is not None:
        (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git_repo(user)
    return user


def _pre_commit(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """pre-commit with a PATH that holds no `infra` (BARE_PATH): a hook finds only its own environment's."""
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, env={**env, "PATH": BARE_PATH},
                          capture_output=True, text=True, timeout=600)


def test_pre_commit_try_repo_validates_stacks_with_the_installed_hook(hook_repo, tmp_path):
    repo, _, env = hook_repo
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"infra-validate", "infra-image-check"}
    good = (ROOT / "stacks" / "ib-a100.yaml").read_text()
    user = _user_repo(tmp_path, {"ib-a100.yaml": good, "notes.txt": "not a stack"})
    done = _pre_commit(env, user, "try-repo", str(repo), "infra-validate", "--all-files")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"infra validate \(stack files\)\.+Passed", done.stdout), done.stdout
    bad = _user_repo(tmp_path / "bad", {"gpu.yaml": good.replace("Standard_ND96asr_v4", "Standard_NC24ads_A100_v4")})
    failed = _pre_commit(env, bad, "try-repo", str(repo), "infra-validate", "--all-files")
    assert failed.returncode == 1 and "Failed" in failed.stdout, failed.stdout + failed.stderr
    assert "Standard_NC24ads_A100_v4" in failed.stdout and "stacks/gpu.yaml" in failed.stdout, failed.stdout


TWO_WORKSPACES = """\
variables:
  env: {type: string, default: staging, allowed: [staging, prod]}
  nodes: {type: number, default: 2}
  admin_password: {type: string, sensitive: true}
stack: train-${var.env}
workspace:
  subscription_id: 00000000-0000-0000-0000-000000000000
  resource_group: rg-${var.env}
  name: mlw-${var.env}
  location: eastus
clusters:
  a100:
    size: Standard_ND96asr_v4
    max_instances: "${var.nodes}"
    ssh_settings: {admin_username: azureuser, admin_password: "${var.admin_password}"}
"""


def test_pre_commit_hook_passes_a_two_workspace_stack_and_its_var_files_without_the_secret(hook_repo, tmp_path):
    # issue 43 walk: the README's staging/prod stack with a sensitive admin password, its var files beside it in
    # stacks/ (the hook's files: pattern passes them), no secret on the developer's machine: the hook passes,
    # says what each var file is, and fails a var file's bad value at that file
    repo, _, env = hook_repo
    files = {"train.yaml": TWO_WORKSPACES, "staging.yaml": "env: staging\n", "prod.vars.yaml": 'env: prod\nnodes: "4"\n',
             "ci.vars.json": '{"nodes": "1"}'}
    user = _user_repo(tmp_path, files)
    done = _pre_commit(env, user, "try-repo", str(repo), "infra-validate", "--all-files", "--verbose")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "stacks/staging.yaml:1:1: info[variable.file-for]: a variables file for stacks/train.yaml" in done.stdout
    assert "stacks/prod.vars.yaml:1:1: info[variable.file-for]" in done.stdout, done.stdout
    assert "stacks/ci.vars.json:1:1: info[variable.file-for]" in done.stdout, done.stdout
    assert "warning[variable.unknown]: variable 'admin_password'" in done.stdout and "stack:" not in done.stdout
    bad = _user_repo(tmp_path / "bad", {**files, "prod.vars.yaml": "env: production\n"})
    failed = _pre_commit(env, bad, "try-repo", str(repo), "infra-validate", "--all-files")
    assert failed.returncode == 1 and "stacks/prod.vars.yaml:1:6: error[variable.not-allowed]" in failed.stdout, \
        failed.stdout


def test_the_validate_hook_passes_stacks_and_every_var_file_the_readme_names():
    # the README reads NAME.vars.yaml, .vars.yml and .vars.json as var files; the hook's pattern passed only
    # YAML, so a team's prod.vars.json was never checked before it was committed (pre-commit: re.search)
    [hook] = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == "infra-validate"]
    files = re.compile(hook["files"])
    passed = ["stacks/train.yaml", "infra/stacks/gpu.yml", "stacks/prod.vars.yaml", "stacks/prod.vars.yml",
              "stacks/prod.vars.json"]
    assert [f for f in passed if not files.search(f)] == []
    assert [f for f in ("stacks/data.json", "notes.txt", "other/train.yaml") if files.search(f)] == []


def test_pre_commit_image_check_hook_pinned_at_a_commit(hook_repo, images, tmp_path):
    repo, commit, env = hook_repo

    def config(image: str) -> dict:
        return {"repos": [{"repo": str(repo), "rev": commit, "hooks": [
            {"id": "infra-image-check", "args": [image, "--require", "openmpi>=4.1"]}]}]}

    user = _user_repo(tmp_path, {"ib-a100.yaml": "stack: x\n"}, config(images.refs["openmpi"]))
    done = _pre_commit(env, user, "run", "infra-image-check", "--all-files", "--verbose")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"PASS +openmpi>=4\.1", done.stdout), done.stdout
    # the hook ran pre-commit's own installation of the repository at that commit, not this checkout
    assert list(Path(env["PRE_COMMIT_HOME"]).glob("repo*/py_env-*/bin/infra")), "no environment with infra in it"
    user = _user_repo(tmp_path / "unmet", {"ib-a100.yaml": "stack: x\n"}, config(images.refs["mpich"]))
    failed = _pre_commit(env, user, "run", "infra-image-check", "--all-files")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert re.search(r"FAIL +openmpi>=4\.1", failed.stdout), failed.stdout   # the unmet requirement, named


def test_action_readme_and_hooks_name_one_version():
    """action.yml's usage, the README's `uses:`/`rev:` and .pre-commit-hooks.yaml's example pin the release the
    package is (pyproject.toml reads its version from infra_cli.__version__)."""
    from infra_cli import __version__

    texts = {name: (ROOT / name).read_text() for name in ("action.yml", ".pre-commit-hooks.yaml", "README.md")}
    pins = {(name, m) for name, text in texts.items()
            for m in re.findall(r"(?:OWNER/infra@|rev: |OWNER/infra@)(v[0-9][^\s\"']*)", text)}
    assert {name for name, _ in pins} == set(texts), pins   # each of them names a release
    assert {version for _, version in pins} == {f"v{__version__}"}, pins


def test_the_readme_workflow_is_the_example_file():
    """The workflow the README shows is a file users copy (docs/examples/), valid YAML whose infra step uses only
    options `infra image check` has."""
    example = (ROOT / "docs" / "examples" / "image-check-workflow.yml").read_text()
    assert f"```yaml\n{example}```" in (ROOT / "README.md").read_text()
    steps = yaml.safe_load(example)["jobs"]["image-check"]["steps"]
    run = next(s["run"] for s in steps if "infra image check" in s.get("run", ""))
    from infra_cli.commands.image import check
    import inspect

    options = {opt for p in inspect.signature(check).parameters.values()
               for opt in (getattr(p.default, "param_decls", None) or ()) if opt.startswith("--")}
    assert set(re.findall(r"(--[a-z-]+)", run)) <= options, run
