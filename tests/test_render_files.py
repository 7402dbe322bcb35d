"""`infra render`: the written files load with azure-ai-ml's own load_compute / load_environment (the SDK is
the oracle for field names), values round-trip, and no secret reaches any file or output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra_cli.diagnostics import DiagnosticError
from infra_cli.apply.files import render_stack
from infra_cli.stack.load import load_stack

# azure-ai-ml's schemas warn about marshmallow 4 on import; that is the SDK's business, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:.*:marshmallow.warnings.Marshmallow4Warning")

ROOT = Path(__file__).resolve().parent.parent
FULL = ROOT / "tests" / "fixtures" / "render" / "full.yaml"
SECRETS = {"RENDER_TEST_PASSWORD": "pw-Sup3rSecret-9f2c", "RENDER_TEST_SSH_KEY": "ssh-rsa AAAAB3NzaSECRETKEY7d1e"}
EXAMPLES = sorted((ROOT / "stacks").glob("*.yaml"))


@pytest.fixture
def secrets_env(monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)


def check_cluster_round_trip(path: Path, name: str, cluster) -> None:
    from azure.ai.ml import load_compute

    c = load_compute(path)
    assert (c.name, c.type, c.size, c.tier) == (name, "amlcompute", cluster.size, cluster.tier)
    assert (c.min_instances, c.max_instances, c.idle_time_before_scale_down) == \
        (cluster.min_instances, cluster.max_instances, cluster.idle_time_before_scale_down)
    assert c.enable_node_public_ip is cluster.enable_node_public_ip
    assert c.location == cluster.location and c.description == cluster.description
    assert (c.tags or {}) == cluster.tags
    assert c.ssh_public_access_enabled == cluster.ssh_public_access_enabled
    if cluster.ssh_settings:
        assert c.ssh_settings.admin_username == cluster.ssh_settings.admin_username
        assert c.ssh_settings.admin_password is None and c.ssh_settings.ssh_key_value is None
    if cluster.network_settings:
        assert (c.network_settings.vnet_name, c.network_settings.subnet) == \
            (cluster.network_settings.vnet_name, cluster.network_settings.subnet)
    else:
        assert c.network_settings is None
    if cluster.identity:
        assert c.identity.type == cluster.identity.type
        want = [u.resource_id for u in cluster.identity.user_assigned_identities or []]
        assert [u.resource_id for u in c.identity.user_assigned_identities or []] == want
    else:
        assert c.identity is None


def check_environment_round_trip(path: Path, name: str, env, stack_dir: Path) -> None:
    from azure.ai.ml import load_environment

    e = load_environment(path)
    assert (e.name, e.version, e.description) == (name, env.version, env.description)
    assert (e.tags or {}) == env.tags
    assert e.image == env.image
    if env.conda_file:  # the SDK reads the copied file: its content is the original's
        assert e.conda_file == yaml.safe_load((stack_dir / env.conda_file).read_text())
    if env.build:
        context = path.parent / e.build.path
        assert (context / e.build.dockerfile_path).is_file()
        if env.build.path:
            original = stack_dir / env.build.path / env.build.dockerfile_path
            assert (context / e.build.dockerfile_path).read_text() == original.read_text()
    else:
        assert e.build is None


def check_rendered(stack_path: Path, out: Path, written: list[Path]) -> None:
    loaded = load_stack(stack_path)
    assert all(p.is_file() and out in p.parents for p in written)
    for name, cluster in loaded.stack.clusters.items():
        path = out / "clusters" / f"{name}.yml"
        assert path in written
        check_cluster_round_trip(path, name, cluster)
    for name, env in loaded.stack.environments.items():
        if env.curated:
            note = out / "environments" / f"{name}.curated.txt"
            assert note in written and env.curated in note.read_text()
            assert not (out / "environments" / f"{name}.yml").exists()
        elif env.build and env.build.template and (out / "environments" / f"{name}.yml") not in written:
            continue  # the Dockerfile renderer is not there yet: test_template_environment covers both ways
        else:
            check_environment_round_trip(out / "environments" / f"{name}.yml", name, env, loaded.base_dir)
    if loaded.stack.distributions:
        jobs = [p for p in written if (out / "jobs") in p.parents]
        assert any(p.suffix == ".yml" for p in jobs), "no job YAML rendered"


@pytest.mark.parametrize("stack", EXAMPLES, ids=lambda p: p.name)
def test_example_stacks_render_files_the_sdk_loads(stack, tmp_path):
    written, warnings = render_stack(stack, tmp_path)
    assert all(d.severity == "warning" for d in warnings)
    check_rendered(stack, tmp_path, written)


def test_every_field_round_trips_and_secrets_stay_out(tmp_path, secrets_env):
    written, _ = render_stack(FULL, tmp_path)
    check_rendered(FULL, tmp_path, written)
    assert {p.name for p in written} >= {"a100-spot.yml", "cpu-sys.yml", "custom-image.yml", "own-context.yml",
                                          "conda.yml", "Dockerfile.gpu", "curated.curated.txt"}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            for secret in SECRETS.values():
                assert secret not in text, path
    note = (tmp_path / "clusters" / "a100-spot.yml").read_text()
    assert "--set ssh_settings.admin_password=" in note and "--set ssh_settings.ssh_key_value=" in note
    assert "--set" not in (tmp_path / "clusters" / "cpu-sys.yml").read_text()


def test_cli_render_prints_paths_and_no_secret(tmp_path):
    import os

    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "infra_cli", "render", str(FULL), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, **SECRETS})
    assert r.returncode == 0, r.stderr
    assert str(out / "clusters" / "a100-spot.yml") in r.stdout.splitlines()
    for secret in SECRETS.values():
        assert secret not in r.stdout + r.stderr


def test_template_environment(tmp_path):
    """A template environment renders as a build context holding the rendered Dockerfile."""
    from azure.ai.ml import load_environment

    stack = ROOT / "stacks" / "mpi-deepspeed.yaml"
    written, warnings = render_stack(stack, tmp_path)
    env_file = tmp_path / "environments" / "openmpi-deepspeed.yml"
    assert env_file in written
    e = load_environment(env_file)
    dockerfile = env_file.parent / e.build.path / "Dockerfile"
    assert dockerfile in written and "FROM " in dockerfile.read_text()


def test_invalid_stack_renders_nothing(tmp_path):
    bad = ROOT / "tests" / "fixtures" / "bad_stacks" / "ineligible_size.yaml"
    with pytest.raises(DiagnosticError) as exc:
        render_stack(bad, tmp_path / "out")
    assert any(d.rule == "cluster.infiniband-ineligible" for d in exc.value.diagnostics)
    assert not (tmp_path / "out").exists()
    r = subprocess.run([sys.executable, "-m", "infra_cli", "render", str(bad), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "error[cluster.infiniband-ineligible]" in r.stderr


def test_unwritable_output_is_a_diagnostic(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = subprocess.run([sys.executable, "-m", "infra_cli", "render", str(EXAMPLES[0]), "--out", str(blocker)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "error[render.write]" in r.stderr


JOB_STACK = """\
stack: jobs
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  acpt: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  train:
    cluster: gpu
    environment: acpt
    code: src
    command: python train.py --epochs ${{inputs.epochs}} --data ${{inputs.cifar}} --out ${{outputs.model}}
    inputs:
      epochs: 1
      cifar: {type: uri_folder, path: "azureml:cifar-10-example@latest"}
    outputs:
      model: {type: uri_folder, mode: rw_mount}
    distribution: {type: pytorch, process_count_per_instance: 8}
    resources: {instance_count: 2, shm_size: 3100m, docker_args: "--ipc=host"}
    limits: {timeout: 3600}
    services: {vscode: {type: vs_code, nodes: all}}
    queue_settings: {job_tier: standard}
    identity: {type: user_identity}
    tags: {team: vision}
    display_name: cifar
    experiment_name: cifar-ddp
    description: "a job: with a colon"
"""


def test_training_job_carries_the_pasted_job_keys_and_loads(tmp_path):
    """inputs/outputs (the command's ${{...}} bindings), limits.timeout, services, queue_settings, identity, tags,
    display_name, experiment_name and resources.shm_size/docker_args reach train-job.yml, which azure-ai-ml's
    load_job accepts (before: "Inputs to job does not contain 'epochs'")."""
    from azure.ai.ml import load_job

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print(1)\n", encoding="utf-8")
    stack = tmp_path / "stack.yaml"
    stack.write_text(JOB_STACK, encoding="utf-8")
    render_stack(stack, tmp_path / "out")
    job = load_job(tmp_path / "out" / "jobs" / "train" / "train-job.yml")
    assert job.inputs["epochs"]._data == 1 and job.inputs["cifar"].path.endswith("cifar-10-example@latest")
    assert job.outputs["model"].mode == "rw_mount"
    assert (job.limits.timeout, job.queue_settings.job_tier, job.identity.type) == (3600, "standard", "user_identity")
    assert (job.resources.instance_count, job.resources.shm_size, job.resources.docker_args) == (2, "3100m", "--ipc=host")
    assert set(job.services) == {"vscode"}
    assert (job.display_name, job.experiment_name, job.description) == ("cifar", "cifar-ddp", "a job: with a colon")
    assert job.tags["team"] == "vision" and job.tags["infra.address"] == "job.train"
    assert job.distribution.process_count_per_instance == 8


def test_pasted_job_values_are_data_in_the_job_file(tmp_path):
    """A value with a newline, a key with a colon, or a YAML date stays one value: nothing in inputs/services adds
    a key to the job document (each is written as JSON). A key with a newline is refused by the loader (no name
    holds a control character)."""
    (tmp_path / "src").mkdir()
    stack = tmp_path / "stack.yaml"
    stack.write_text(JOB_STACK.replace("      epochs: 1\n", '      epochs: 1\n      "x compute: evil": "a\\ncode: /etc"\n'
                                       "      day: 2024-01-01\n"), encoding="utf-8")
    render_stack(stack, tmp_path / "out")
    doc = yaml.safe_load((tmp_path / "out" / "jobs" / "train" / "train-job.yml").read_text(encoding="utf-8"))
    assert doc["compute"] == "azureml:gpu" and doc["code"] != "/etc"
    assert doc["inputs"]["x compute: evil"] == "a\ncode: /etc" and doc["inputs"]["day"] == "2024-01-01"
