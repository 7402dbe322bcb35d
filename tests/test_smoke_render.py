"""Rendered smoke and training jobs: azure-ai-ml's load_job reads every one, the SDK's command(...) builds
the same job, and no stack value can inject shell or YAML."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from azure.ai.ml import load_job

from infra_cli.diagnostics import DiagnosticError
from infra_cli.smoke.job_templates import render_distribution_jobs
from infra_cli.azure.jobs import sdk_command_job
from infra_cli.smoke.job_templates import smoke_jobs
from infra_cli.stack.load import load_stack

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted((ROOT / "stacks").glob("*.yaml"))

HOSTILE = "ddp'; touch /tmp/PWNED_$USER; echo '$(id)`id`\"\nkey: injected"
HOSTILE_ONE_LINE = HOSTILE.replace("\n", " ")


def _stack_text(dist_name: str, env_value: str, extra: str = "") -> str:
    return f"""
stack: hostile
workspace: {{subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}}
clusters:
  a100: {{size: Standard_ND96asr_v4, max_instances: 2, infiniband: required}}
environments:
  env: {{curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}}
distributions:
  {yaml.safe_dump(dist_name, default_style='"').strip()}:
    cluster: a100
    environment: env
    type: pytorch
    instance_count: 2
    process_count_per_instance: 8
    environment_variables:
      NCCL_DEBUG: WARN
      WEIRD: {yaml.safe_dump(env_value, default_style='"').strip()}
{extra}"""


@pytest.mark.parametrize("stack", STACKS, ids=[p.stem for p in STACKS])
def test_every_rendered_job_loads_with_load_job(stack, tmp_path):
    written = render_distribution_jobs(load_stack(stack), tmp_path)
    jobs = [p for p in written if p.suffix == ".yml"]
    assert jobs and all(p.exists() for p in written)
    loaded = load_stack(stack)
    for path in jobs:
        job = load_job(path)
        doc = yaml.safe_load(path.read_text())
        dist = loaded.stack.distributions[doc["tags"]["infra.address"].split(".", 1)[1]]
        assert job.resources.instance_count == dist.instance_count
        assert job.distribution.type == dist.type
        assert job.compute == dist.cluster
        if path.name == "smoke-job.yml":   # the preflight beside it runs first, before any launcher or rank
            assert doc["command"].startswith("python preflight.py --module ") and " && " in doc["command"]
            assert (path.parent / "preflight.py").is_file()
    for script in (p for p in written if p.suffix == ".py"):
        compile(script.read_text(), str(script), "exec")


def test_smoke_job_carries_size_env_debug_env_and_user_env_on_top(tmp_path):
    # the example stack plus a user variable that overrides one of the job's own
    text = (ROOT / "stacks" / "mpi-deepspeed.yaml").read_text().rstrip("\n")
    stack = tmp_path / "mpi-deepspeed.yaml"
    stack.write_text(text + "\n    environment_variables:\n      NCCL_DEBUG: WARN\n")
    loaded = load_stack(stack)
    [job_path, _script, _preflight] = render_distribution_jobs(loaded, tmp_path / "out")
    job = load_job(job_path)
    env = job.environment_variables
    assert env["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv4-topo.xml"  # the ND A100 v4 profile from the catalog
    assert env["NCCL_DEBUG_SUBSYS"].split(",")[:2] == ["INIT", "NET"]
    assert env["NCCL_DEBUG_FILE"] == "outputs/nccl/%h.%p.log"  # one file per rank
    assert env["NCCL_DEBUG"] == "WARN"  # the stack's own value wins
    assert job.distribution.type == "mpi" and job.distribution.process_count_per_instance == 8
    # the job's python must find torch, numpy (the smoke's) and deepspeed (the framework's) before any rank starts
    preflight = "python preflight.py --module torch --module numpy --framework deepspeed=deepspeed --outputs outputs && "
    assert job.command.startswith(preflight + "python ddp_smoke.py ")
    assert "--instance-count 2 --processes-per-instance 8" in job.command


def test_per_node_launcher_renders_torchrun(tmp_path):
    loaded = load_stack(ROOT / "stacks" / "lightning-per-node.yaml")
    written = render_distribution_jobs(loaded, tmp_path)
    smoke = load_job(next(p for p in written if p.name == "smoke-job.yml"))
    assert smoke.distribution.process_count_per_instance == 1  # one launcher per node
    assert smoke.command.startswith("python preflight.py --module torch --module numpy --framework lightning=lightning "
                                    "--launcher torchrun --outputs outputs && "
                                    "torchrun --nnodes 2 --nproc_per_node 8 --node_rank $NODE_RANK")
    assert "--processes-per-instance 8" in smoke.command  # 8 GPUs of Standard_ND96amsr_A100_v4
    train = next(p for p in written if p.name == "train-job.yml")
    doc = yaml.safe_load(train.read_text())
    assert doc["command"] == "python train.py --trainer.num_nodes 2 --trainer.devices 8"
    # the code is copied beside the jobs and named relative to the job file: the folder can move
    assert doc["code"] == "../../code/" + train.parent.name
    copied = (train.parent / doc["code"]).resolve()
    assert copied.is_relative_to(tmp_path.resolve()) and (copied / "train.py").read_bytes() == \
        (ROOT / "stacks" / "src" / "train.py").read_bytes()
    assert load_job(train).code is not None


def test_tensorflow_distribution_renders_tf_smoke(tmp_path):
    written = render_distribution_jobs(load_stack(ROOT / "stacks" / "tf-multiworker.yaml"), tmp_path)
    job = load_job(next(p for p in written if p.suffix == ".yml"))
    assert job.distribution.type == "tensorflow" and job.distribution.worker_count == 2
    assert job.command.startswith("python preflight.py --module tensorflow --outputs outputs && python tf_smoke.py ") and "--worker-count 2 --parameter-server-count 0" in job.command
    assert any(p.name == "tf_smoke.py" for p in written)


def test_hostile_names_and_values_cannot_inject_shell_or_yaml(tmp_path):
    stack_file = tmp_path / "hostile.yaml"
    stack_file.write_text(_stack_text(HOSTILE, "x\"\n  injected: true # '$(id)'"))
    with pytest.raises(DiagnosticError, match="control characters"):   # the loader refuses a newline in a name
        load_stack(stack_file)
    # what a name and a variable may hold reaches the job file as data: quotes, `$(...)`, `#`, `: `
    stack_file.write_text(_stack_text(HOSTILE_ONE_LINE, "x\" injected: true # '$(id)'"))
    loaded = load_stack(stack_file)
    written = render_distribution_jobs(loaded, tmp_path / "out")
    job_path = next(p for p in written if p.suffix == ".yml")
    assert job_path.parent.parent == tmp_path / "out" / "jobs"  # the name cannot climb out of the folder
    doc = yaml.safe_load(job_path.read_text())
    assert set(doc["environment_variables"]) >= {"WEIRD", "NCCL_DEBUG"} and "injected" not in doc
    assert doc["environment_variables"]["WEIRD"] == "x\" injected: true # '$(id)'"
    assert load_job(job_path).command == doc["command"]
    # Run the command's arguments through a real shell: the hostile name must arrive as one literal argument.
    probe = "import json, sys; print(json.dumps(sys.argv[1:]))"
    assert doc["command"].startswith("python preflight.py --module torch --module numpy --outputs outputs && ")
    command = doc["command"].replace("python preflight.py", "true", 1)
    command = command.replace("python ddp_smoke.py", f"{sys.executable} -c {probe!r}", 1)
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    import json

    argv = json.loads(out)
    assert argv[argv.index("--label") + 1] == HOSTILE_ONE_LINE
    assert not list(Path("/tmp").glob("PWNED_*"))


def test_sdk_command_matches_rendered_yaml(tmp_path):
    loaded = load_stack(ROOT / "stacks" / "ib-h100.yaml")
    written = render_distribution_jobs(loaded, tmp_path)
    from_yaml = load_job(written[0])
    [job] = smoke_jobs(loaded)
    from_sdk = sdk_command_job(job.spec, written[0].parent)
    for field in ("command", "environment_variables", "experiment_name", "display_name", "tags", "compute"):
        assert getattr(from_sdk, field) == getattr(from_yaml, field), field
    assert from_sdk.distribution == from_yaml.distribution
    assert from_sdk.resources.instance_count == from_yaml.resources.instance_count == 4
    assert from_sdk.environment == from_yaml.environment == "AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"


def test_unknown_distribution_is_a_diagnostic():
    from infra_cli.diagnostics import DiagnosticError

    with pytest.raises(DiagnosticError) as err:
        smoke_jobs(load_stack(ROOT / "stacks" / "ib-a100.yaml"), ["nope"])
    [d] = err.value.diagnostics
    assert d.rule == "smoke.unknown-distribution" and "ddp" in d.hint


def test_smoke_help_imports_nothing_heavy():
    code = ("import sys; sys.argv = ['infra', 'smoke', '--help']\n"
            "from infra_cli.commands.main import main\n"
            "try:\n    main()\nexcept SystemExit: pass\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'jinja2') or m.startswith('azure.')"
            " or m.startswith('infra_cli.emulator.server')]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT).stdout
    assert "HEAVY []" in out and "--distribution" in out
