"""The first hour of a Terraform user: what infra says when no Azure credential is set up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.core.pipeline.transport import HttpRequest

from infra_cli.azure.provider import AzureProvider
from infra_cli.commands.errors import report_error

ROOT = Path(__file__).resolve().parent.parent


def _no_credential_env(home: Path) -> dict:
    """No credential of DefaultAzureCredential's chain can work, and none reaches past this machine: no
    service-principal variables, an empty home (no az, azd or shared token cache), no az on PATH, and the
    managed identity pointed at a closed loopback port instead of the instance metadata address."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AZUREML_", "MSI_", "IDENTITY_"))}
    keep.update(HOME=str(home), PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin",
                IDENTITY_ENDPOINT="http://127.0.0.1:9/msi", IDENTITY_HEADER="x", MSI_ENDPOINT="http://127.0.0.1:9/msi")
    return keep


def test_no_credential_is_one_short_message_naming_the_ways_in(tmp_path):
    r = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(ROOT / "stacks" / "ib-a100.yaml")],
                       capture_output=True, text=True, env=_no_credential_env(tmp_path), cwd=tmp_path, timeout=300)
    assert r.returncode == 1
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) <= 6, "\n".join(lines)
    text = "\n".join(lines)
    assert "az login" in text and "AZURE_CLIENT_ID" in text and "--local" in text and "INFRA_DEBUG=1" in text
    assert "Azure refused" not in text and "Traceback" not in text


def test_the_chain_is_behind_infra_debug(capsys, monkeypatch):
    monkeypatch.setenv("INFRA_DEBUG", "1")
    report_error(ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token.\n"
                                           "Attempted credentials:\n\tAzureCliCredential: Azure CLI not found"))
    err = capsys.readouterr().err
    assert "AzureCliCredential: Azure CLI not found" in err and "az login" in err


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_azure_answered_is_still_azures(capsys, status):
    from azure.core.pipeline.transport import RequestsTransportResponse
    import requests

    raw = requests.Response()
    raw.status_code, raw._content = status, b'{"error": {"code": "InvalidAuthenticationToken", "message": "expired"}}'
    response = RequestsTransportResponse(HttpRequest("GET", "https://management.azure.com/"), raw)
    report_error(ClientAuthenticationError(response=response))
    err = capsys.readouterr().err
    assert "Azure refused: InvalidAuthenticationToken" in err and "az login" not in err


# ---- completion for the shell named ------------------------------------------------------------------------

# what each shell's script is recognised by, and the variable naming that shell when it asks for completions
_SCRIPTS = {"bash": "complete -o default -F _infra_completion infra", "zsh": "#compdef infra",
            "fish": "complete --command infra", "powershell": "Register-ArgumentCompleter",
            "pwsh": "Register-ArgumentCompleter"}


def _infra(*args: str, env: dict | None = None, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or ROOT, timeout=300, **kw)


@pytest.mark.parametrize("shell", sorted(_SCRIPTS))
def test_show_completion_is_the_script_of_the_shell_named(shell):
    r = _infra("--show-completion", shell)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert _SCRIPTS[shell] in r.stdout
    others = {s for s, mark in _SCRIPTS.items() if mark != _SCRIPTS[shell]}
    assert not any(_SCRIPTS[o] in r.stdout for o in others)
    complete_as = "powershell" if shell == "pwsh" else shell
    assert f"complete_{complete_as}" in r.stdout


def test_install_completion_for_the_shell_named(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    r = _infra("--install-completion", "zsh", env=env)
    assert r.returncode == 0, r.stderr
    assert "zsh completion installed in" in r.stdout
    assert "_INFRA_COMPLETE=complete_zsh" in (tmp_path / ".zfunc" / "_infra").read_text()
    assert not (tmp_path / ".bashrc").exists()


@pytest.mark.parametrize("option", ["--show-completion", "--install-completion"])
def test_an_unknown_shell_is_a_clear_error(option, tmp_path):
    r = _infra(option, "tcsh", env={**os.environ, "HOME": str(tmp_path)})
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == (f"error: shell 'tcsh' is not supported: name one of bash, zsh, fish, powershell, "
                                f"pwsh, as in `infra {option} zsh`")


def test_no_shell_named_and_none_detected_says_to_name_one(monkeypatch, capsys):
    """Without a parent shell typer printed `Shell  not supported.`."""
    from infra_cli.commands import root
    from infra_cli.commands.main import app

    monkeypatch.setattr(root, "_get_shell_name", lambda: None)
    with pytest.raises(SystemExit) as exit_:
        app(["--show-completion"], prog_name="infra")
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: could not tell which shell runs infra: name one of bash, zsh, fish")


def test_completions_answer_the_shell_that_asks():
    env = {**os.environ, "_INFRA_COMPLETE": "complete_bash", "COMP_WORDS": "infra pl", "COMP_CWORD": "1"}
    r = _infra(env=env)
    assert r.returncode == 0 and r.stdout.split() == ["plan"], r.stdout + r.stderr


def test_a_folder_given_as_the_stack_names_the_stack_files_in_it():
    """`infra plan stacks --local` (Terraform reads a folder's *.tf) said "pass the path of a stack YAML file":
    the hint names the stack files there, which run as named."""
    r = _infra("validate", "stacks")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "stacks: error[stack.unreadable]: stacks is a directory, not a stack file" in r.stderr, r.stderr
    assert "pass one of the YAML files here (stacks/ib-a100.yaml, stacks/ib-h100.yaml, " in r.stderr, r.stderr
    assert _infra("validate", "stacks/ib-a100.yaml").returncode == 0


# ---- every command a hint names carries --local on a local run ------------------------------------------------

def _local_cli(*args: str, emulator, state: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "INFRA_EMULATOR_URL")}
    env.update(INFRA_EMULATOR_URL=emulator.url, INFRA_LOCAL_DIR=str(state))
    r = _infra(*args, env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_hints_after_a_local_run_name_commands_with_local(tmp_path, emulator, clients):
    from azure.ai.ml.entities import AmlCompute
    from test_lifecycle_local import write_stack

    from infra_cli.state.lock import StackLock

    path = write_stack(tmp_path)
    state = tmp_path / "local"
    clients.ml.compute.begin_create_or_update(AmlCompute(
        name="gpu", size="Standard_ND96asr_v4", max_instances=2, idle_time_before_scale_down=900,
        enable_node_public_ip=True)).result()   # same name, no ownership tag: plan.unmanaged-resource
    r = _local_cli("plan", str(path), "--local", emulator=emulator, state=state)
    assert r.returncode == 1 and "plan.unmanaged-resource" in r.stderr
    # stdout redirected: the errors and the line that sums them up are on one stream (stderr); stdout shows the
    # changes for context but no "Plan:" count of what apply would do, since apply refuses it
    assert "Not applicable until the error is fixed: 2 to add, 0 to change, 0 to destroy." in r.stdout, r.stdout
    assert "(above)" not in r.stdout and "\nPlan: " not in r.stdout and "smoke job to run" not in r.stdout, r.stdout
    assert r.stderr.rstrip().endswith("The plan has 1 error: apply refuses it until it is fixed.") or \
        "The plan has 1 error: apply refuses it until it is fixed. The changes it would make" in r.stderr, r.stderr
    assert f"`infra import cluster.gpu gpu {path} --local`" in r.stderr, r.stderr
    r = _local_cli("plan", str(path), "--local", "--json", emulator=emulator, state=state)
    (hint,) = [d["hint"] for d in json.loads(r.stdout)["diagnostics"] if d["rule"] == "plan.unmanaged-resource"]
    assert f"`infra import cluster.gpu gpu {path} --local`" in hint

    r = _local_cli("import", "cluster.gpu", "gpu", str(path), "--local", emulator=emulator, state=state)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"Imported gpu as cluster.gpu. Run `infra plan {path} --local` to see how it differs " \
                               "from the stack."
    r = _local_cli("import", "cluster.gpu", "other", str(path), "--local", emulator=emulator, state=state)
    assert r.returncode == 1 and f"`infra import cluster.other other {path} --local`" in r.stderr

    planfile = tmp_path / "saved.plan"
    r = _local_cli("plan", str(path), "--local", "--out", str(planfile), emulator=emulator, state=state)
    assert r.stdout.rstrip().endswith(f"To perform exactly these actions: infra apply {planfile} --local")

    with StackLock(AzureProvider(clients), "life", "apply"):   # another apply holds the stack
        r = _local_cli("apply", str(path), "--local", "--auto-approve", "--no-smoke", emulator=emulator, state=state)
    assert r.returncode == 1 and "run `infra force-unlock " in r.stderr and f" {path} --local`" in r.stderr, r.stderr


_VARIABLES_STACK = """variables:
  env: {type: string, default: staging, allowed: [staging, test]}
  nodes: {type: number, default: 1}
  admin_password: {type: string, sensitive: true}
stack: first-hour-${var.env}
workspace:
  subscription_id: %s
  resource_group: rg-${var.env}
  name: mlw-${var.env}
  location: eastus
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: "${var.nodes}"}
"""


def _hinted(text: str, start: str) -> list[str]:
    """The command a message names in backquotes, starting with `start`, as words to run."""
    import shlex

    command = text.split(f"`{start}", 1)[1].split("`", 1)[0]
    return shlex.split(start + command)[1:]   # without the leading `infra`


def test_hints_name_commands_with_the_runs_variables_and_they_run_as_written(tmp_path, emulator, clients,
                                                                               monkeypatch):
    """The staging/prod walk of the README: a hint after `--var-file prod.yaml` named `infra import ... s.yaml
    --local` and a stale plan's `infra plan s.yaml --out FILE --local`; run as written they read the default
    (staging) workspace: "there is no cluster 'a100' in workspace 'mlw-staging'", or a plan for staging."""
    from azure.ai.ml.entities import AmlCompute
    from emulator_fixtures import TEST_SUBSCRIPTION

    path = tmp_path / "train.yaml"
    path.write_text(_VARIABLES_STACK % TEST_SUBSCRIPTION)
    values = tmp_path / "test.yaml"
    values.write_text("env: test\n")   # rg-test / mlw-test: the emulator fixture's workspace
    state = tmp_path / "local"
    monkeypatch.setenv("INFRA_VAR_admin_password", "from-the-environment")
    clients.ml.compute.begin_create_or_update(AmlCompute(
        name="gpu", size="Standard_ND96asr_v4", max_instances=2)).result()   # not tagged: plan.unmanaged-resource
    r = _local_cli("plan", str(path), "--var-file", str(values), "--var", "nodes=2", "--var", "admin_password=hunter2",
                   "--local", emulator=emulator, state=state)
    assert r.returncode == 1 and "plan.unmanaged-resource" in r.stderr, r.stderr
    assert f"`infra import cluster.gpu gpu {path} --var-file {values} --var nodes=2 --local`" in r.stderr, r.stderr
    assert "hunter2" not in r.stdout + r.stderr   # a sensitive --var is never repeated

    r = _local_cli(*_hinted(r.stderr, "infra import "), emulator=emulator, state=state)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Run `infra plan {path} --var-file {values} --var nodes=2 --local`" in r.stdout, r.stdout



def test_a_stale_plans_hint_makes_it_again_with_its_own_values(tmp_path):
    """`infra apply prod.plan` refused as stale named `infra plan train.yaml --out prod.plan`: run as written, a
    plan for the default (staging) workspace. The replan names the plan's recorded values (a saved plan's apply
    takes no --var); a sensitive one (kept as a digest) comes again from INFRA_VAR_<name>, as when it was made."""
    import shlex
    from types import SimpleNamespace

    from infra_cli.plan.model import PlanMode
    from infra_cli.plan.planfile import replan_command
    from infra_cli.stack.variables import Value, recorded_values

    recorded = recorded_values({"env": Value("prod", False, "prod.yaml:1:6"), "nodes": Value(2, False, "--var nodes"),
                                "admin_password": Value("hunter2", True, "INFRA_VAR_admin_password"),
                                "zones": Value(["a b", "c"], False, "default"), "spot": Value(True, False, "default")})
    saved = SimpleNamespace(plan=SimpleNamespace(mode=PlanMode.NORMAL), targets=[], replace=[],
                            stack_path=tmp_path / "train.yaml", variables=recorded)
    command = replan_command(saved, "prod.plan")
    assert shlex.split(command) == ["infra", "plan", str(tmp_path / "train.yaml"), "--var", "env=prod", "--var",
                                    "nodes=2", "--var", "spot=true", "--var", 'zones=["a b", "c"]', "--out",
                                    "prod.plan"], command
    assert "hunter2" not in command and "admin_password" not in command


def test_hints_name_commands_as_they_are_without_local():
    from infra_cli.arguments import NextStep, RunArgs
    from infra_cli.commands.hints import rendered
    from infra_cli.diagnostics import says

    text = says("adopt it with ", NextStep(("infra", "import"), ("cluster.gpu", "gpu", "s.yaml")), ", then ",
                NextStep(("infra", "plan"), ("s.yaml", "--local")), "; ", NextStep(("az", "login")))
    assert text == "adopt it with `infra import cluster.gpu gpu s.yaml`, then `infra plan s.yaml --local`; `az login`"
    assert rendered(text, RunArgs()) == text
    assert rendered(text, RunArgs(local=True)) == ("adopt it with `infra import cluster.gpu gpu s.yaml --local`, "
                                                   "then `infra plan s.yaml --local`; `az login`")


def test_a_local_runs_hint_names_an_infra_listing_not_az():
    # `az ml compute list` cannot reach the local Azure: a local run names what lists it there, for its stack
    from infra_cli.arguments import NextStep, RunArgs
    from infra_cli.commands.hints import rendered
    from infra_cli.diagnostics import LIST_COMPUTES, LIST_INSTEAD, says

    text = says("check the name with ", NextStep(LIST_COMPUTES, local_instead=LIST_INSTEAD))
    assert rendered(text, RunArgs()) == text == "check the name with `az ml compute list`"
    assert rendered(text, RunArgs(stack="my stacks/s.yaml", local=True)) == \
        "check the name with `infra state list 'my stacks/s.yaml' --local`"


def test_a_local_runs_hint_names_an_infra_listing_not_az_with_arguments():
    # the hints of live.py (`az ml compute show --name X`) and engine.py (`--registry-name R`) carry arguments
    from infra_cli.arguments import RunArgs
    from infra_cli.commands.hints import rendered
    from infra_cli.diagnostics import says
    from infra_cli.plan.engine import environment_listing
    from infra_cli.plan.kinds.cluster import unreadable_diagnostics

    compute = unreadable_diagnostics({"name": "gpu", "unreadable": [{"path": "x", "value": 1, "expected": "y"}]})[0]
    assert compute.hint == "nothing was changed; see what Azure holds with `az ml compute show --name gpu`"
    # the stack's state lists none of a registry's environments: that listing is left as written (re-walk)
    registry = says("check the name and version with ", environment_listing("azureml"))
    assert registry == "check the name and version with `az ml environment list --registry-name azureml`"
    run = RunArgs(stack="s.yaml", local=True)
    assert rendered(compute.hint, run) == "nothing was changed; see what Azure holds with `infra state list s.yaml --local`"
    assert rendered(registry, run) == registry
    assert rendered(says("check the name and version with ", environment_listing(None)), run) == \
        "check the name and version with `infra state list s.yaml --local`"


def test_destroy_counts_only_what_it_destroyed_as_terraform_does(capsys):
    # terraform destroy ends "Destroy complete! Resources: 1 destroyed." (no added/changed counts)
    from types import SimpleNamespace

    from infra_cli.commands import lifecycle

    result = SimpleNamespace(ok=True, interrupted=False, imported=0, added=0, changed=0, destroyed=1, not_started=[],
                             retired=[], failures=[])
    lifecycle._summary(result, "Destroy")
    lifecycle._summary(result)
    out = capsys.readouterr().out
    assert "Destroy complete! Resources: 1 destroyed.\n" in out
    assert "Apply complete! Resources: 0 added, 0 changed, 1 destroyed.\n" in out


# ---- a running smoke: a line every 10 s; Ctrl-C cancels its job ------------------------------------------------

def test_latest_steps_are_read_from_the_ranks_logs():
    from infra_cli.smoke.run import STEP_MARKER, latest_steps

    logs = {f"user_logs/std_log_process_{r}.txt": f"noise\n{STEP_MARKER}world check\n{STEP_MARKER}all_reduce sweep\n"
            for r in range(3)}
    assert latest_steps(logs) == "all_reduce sweep (3 ranks)"
    logs["user_logs/std_log_process_3.txt"] = ""
    assert latest_steps(logs) == "all_reduce sweep x3, starting x1"
    assert latest_steps({"user_logs/std_log.txt": "torch imported\n"}) == ""


def test_the_smoke_script_says_each_step_as_the_runner_reads_it():
    from infra_cli.smoke.run import STEP_MARKER

    script = (ROOT / "templates" / "smoke" / "ddp_smoke.py.j2").read_text()
    assert f'print("{STEP_MARKER}" + name, flush=True)' in script
    assert script.count('    step("') >= 4   # process group, world check, DDP replicas, all_reduce sweep


def test_ctrl_c_while_infra_starts_is_the_interrupted_line_not_a_traceback():
    """Ctrl-C in the first second of `infra plan` (on a loaded machine, while it still imports typer) printed a
    KeyboardInterrupt traceback: the README promises one `Interrupted (Ctrl-C): ...` line and exit 130."""
    code = """
import builtins, sys
real = builtins.__import__
def interrupted(name, *args, **kwargs):
    if name == "typer":   # Ctrl-C arrives while commands/root.py imports it
        raise KeyboardInterrupt
    return real(name, *args, **kwargs)
builtins.__import__ = interrupted
sys.argv = ["infra", "plan", "stacks/ib-a100.yaml", "--local"]
from infra_cli.commands.main import run
run()
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 130 and r.stdout == "", r.stdout + r.stderr
    assert r.stderr == "Interrupted (Ctrl-C): infra stopped; nothing was changed.\n", r.stderr


# ranks that wait at a gate before the smoke script starts: a smoke that runs as long as the test wants
_GATE = """import os, time
gate = os.environ.get("FIRST_HOUR_GATE")
while gate and not os.path.exists(gate):
    time.sleep(0.2)
"""


def test_a_running_smoke_says_it_is_alive_and_ctrl_c_cancels_its_job(tmp_path):
    import signal

    from emulator_fixtures import WORKSPACE_YAML, start_emulator

    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.load import load_stack

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_GATE)
    stack = tmp_path / "stack.yaml"
    stack.write_text(f"""stack: first-hour
{WORKSPACE_YAML}clusters:
  gpu: {{size: Standard_ND96asr_v4, max_instances: 1}}
environments:
  pt: {{curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}}
distributions:
  ddp:
    cluster: gpu
    environment: pt
    type: pytorch
    instance_count: 1
    process_count_per_instance: 2
    environment_variables: {{PYTHONPATH: "{hook}", FIRST_HOUR_GATE: "{tmp_path / 'never'}"}}
""")
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "INFRA_EMULATOR_URL")}
    env["INFRA_LOCAL_DIR"] = str(state)
    # this checkout's infra, not another one installed (the command runs in tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", "apply", str(stack), "--local", "--auto-approve"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    # Should no "Still Running" line ever come (the old code), the gate opens after a while so that the job ends
    # and the test fails on what it printed instead of waiting for the smoke's timeout.
    fallback = threading.Timer(240, (tmp_path / "never").touch)
    fallback.start()
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "Still Running... [" in line:   # the ranks wait at the gate: only Ctrl-C ends this job
            fallback.cancel()
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(seen) + proc.stdout.read()
    fallback.cancel()
    assert proc.wait(timeout=300) == 130, out
    job = next(line.split("submitted job ", 1)[1].split()[0] for line in seen if "submitted job" in line)
    assert f"smoke.ddp: interrupted, job {job} canceled\n" in out
    assert ("Interrupted (Ctrl-C): the smoke job(s) not yet judged were canceled (smoke.ddp). Their smokes stay "
            f"pending (`infra plan {stack} --local` shows them)") in out, out
    assert "Traceback" not in out and "Proceeding with" not in out
    still = [line for line in seen if "Still Running" in line]
    assert still and still[0].startswith("smoke.ddp: Still Running... [") and "s elapsed]" in still[0]

    r = _infra("plan", str(stack), "--local", "--detailed-exitcode", env=env, cwd=tmp_path)
    assert r.returncode == 2 and "smoke.ddp will run (interrupted by Ctrl-C" in r.stdout, r.stdout + r.stderr
    server = start_emulator(state)
    try:
        ml = build_clients(load_stack(stack).stack.workspace, local=True, emulator=server).ml
        assert ml.jobs.get(job).status == "Canceled"
    finally:
        server.stop()


@pytest.mark.parametrize("stack", ["mpi-deepspeed", "mpi-per-node"])
def test_the_image_a_stack_builds_has_the_python_its_smoke_job_calls(stack, tmp_path):
    # issue 34 walk: the smoke job runs `python preflight.py ...` (as Azure ML's examples call python), and the
    # openmpi-rdma template's CUDA base with python3-pip has only `python3`: the job would stop at "python: not
    # found". Its RUN steps, then the rendered job's command as one more step, must need nothing unprovided.
    import yaml

    from infra_cli.apply.files import render_stack
    from infra_cli.validate.build_steps import build_step_problems

    out = tmp_path / "rendered"
    render_stack(ROOT / "stacks" / f"{stack}.yaml", out)
    [dockerfile] = out.glob("environments/*/context/Dockerfile")
    [job] = out.glob("jobs/*/smoke-job.yml")
    command = yaml.safe_load(job.read_text(encoding="utf-8"))["command"]
    assert command.startswith("python ")
    problems = build_step_problems(dockerfile.read_text(encoding="utf-8") + f"RUN {command}\n")
    assert [(p.step, p.message) for p in problems] == []


def test_terraforms_own_commands_say_what_to_run_instead():
    # issue 34 walk: `infra init`, a Terraform user's first command, said "No such command 'init'." and no more
    done = subprocess.run([sys.executable, "-m", "infra_cli", "init"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "No such command 'init': infra needs no init" in done.stderr and "`infra plan STACK`" in done.stderr
    # every hint names commands and options infra has
    import re

    import typer.main

    from infra_cli.commands.root import _TERRAFORM_ONLY, app

    group = typer.main.get_command(app)
    for name, hint in _TERRAFORM_ONLY.items():
        assert group.commands.get(name) is None
        for command, flags in re.findall(r"`infra ([a-z-]+) STACK((?: --[a-z-]+)*)", hint):
            known = {o for p in group.commands[command].params for o in getattr(p, "opts", ())}
            assert set(flags.split()) <= known, (name, command, flags)
