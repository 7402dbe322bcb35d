"""Multi-node jobs without InfiniBand get Azure's verdict (issue 32): Azure ML runs them over TCP sockets.

Public files (tests/realworld/multinode/, verbatim, sources in its README):
- azure-ai-ml's own `tests/test_configs/command_job/dist_job_1.yml` (PyTorch) and `dist_job_2.yml` (MPI), two nodes of
  Azure ML's default size Standard_DS3_v2 (their `compute: azureml:testCompute` has no size): gloo and MPI over TCP
  are how CPU jobs run across nodes, so validate and plan --local are clean (the plan says the transport, an info).
- azureml-examples' `cli/jobs/pipelines-with-components/basics/6b_pytorch_hello_world` on two
  Standard_NC48ads_A100_v4 (no InfiniBand): Azure runs it, slower, so a warning naming TCP sockets, the VM's 40 Gb/s
  Ethernet against the InfiniBand sizes' bandwidth, and the fix; the same cluster with `infiniband: required` is an
  error. The newest guide (how-to-train-distributed-gpu, 2026-01-14) presents InfiniBand as what makes scaling
  linear, not as a condition for running.

The plans swap each job's legacy curated environment (AzureML-sklearn-0.24-ubuntu18.04-py37-cpu,
AzureML-pytorch-1.9-ubuntu18.04-py37-cuda11-gpu) for a current one the `azureml` registry serves
(validators/curated_environments.yaml), since a name the registry no longer lists is plan.environment-not-found
(tests/realworld/test_public_jobs.py), a verdict of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from emulator_fixtures import WORKSPACE_YAML
from realworld_paste import HEADER, pasted_stack

from infra_cli.azure.provider import AzureProvider
from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.engine import load_for_plan, plan_stack
from infra_cli.validate.engine import validate_files

FILES = Path(__file__).parent / "multinode"
SKLEARN_TODAY = "curated: azureml:AzureML-sklearn-1.5@latest"       # azureml-assets sklearn-1.5 (CPU)
PYTORCH_TODAY = "curated: azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"
DEFAULT_SIZE = "Standard_DS3_v2"   # Azure ML's size for a compute without one
NC48 = "Standard_NC48ads_A100_v4"


def _write(tmp_path: Path, text: str, *, live: bool = False) -> Path:
    path = tmp_path / "stack.yaml"
    path.write_text(text.replace(HEADER.splitlines()[1] + "\n", WORKSPACE_YAML) if live else text, encoding="utf-8")
    return path


def _sdk_job(name: str, environment: str | None = None) -> str:
    text = (FILES / name).read_text(encoding="utf-8")
    env = environment or f"curated: {yaml.safe_load(text)['environment']}"
    return pasted_stack(text, cluster="testCompute", size=DEFAULT_SIZE, environment=env)


def _hello_world(environment: str | None = None, cluster_extra: str = "") -> str:
    """The pipeline's one node as the job Azure ML runs: the component's command on the node's compute, with the
    node's resources and distribution."""
    component = yaml.safe_load((FILES / "6b_pytorch_hello_world.component.yml").read_text(encoding="utf-8"))
    node = yaml.safe_load((FILES / "6b_pytorch_hello_world.pipeline.yml").read_text(encoding="utf-8"))["jobs"]["pytorch_job"]
    job = yaml.safe_dump({"command": component["command"], "resources": node["resources"],
                          "distribution": node["distribution"]}, sort_keys=False)
    return pasted_stack(job, cluster=node["compute"].split(":", 1)[1], size=NC48,
                        environment=environment or f"curated: {component['environment']}", cluster_extra=cluster_extra)


def _validate(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    return sorted((d.severity, d.rule) for d in validate_files([_write(tmp_path, text)]))


def _plan(tmp_path: Path, text: str, clients) -> list[tuple[str, str]]:
    loaded, warnings = load_for_plan(_write(tmp_path, text, live=True))
    plan = plan_stack(loaded, AzureProvider(clients), warnings=warnings).plan
    return sorted((d.severity, d.rule) for d in plan.diagnostics)


def test_every_file_names_its_source():
    readme = (FILES / "README.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in FILES.glob("*.yml"))
    assert len(files) == 4
    for name in files:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        _, _, repository, path, _, commit, _ = row.split("`")
        assert repository.strip(" |") in ("Azure/azure-sdk-for-python", "Azure/azureml-examples")
        assert path.endswith(name.split(".", 1)[-1] if name.startswith("6b_") else name) and len(commit) == 40


@pytest.mark.parametrize("name", ["dist_job_1.yml", "dist_job_2.yml"])
def test_sdk_cpu_job_on_two_default_nodes_validates_clean(tmp_path, name):
    assert _validate(tmp_path, _sdk_job(name)) == []


@pytest.mark.parametrize("name", ["dist_job_1.yml", "dist_job_2.yml"])
def test_sdk_cpu_job_on_two_default_nodes_plans_clean_saying_its_transport(tmp_path, name, clients):
    found = _plan(tmp_path, _sdk_job(name, SKLEARN_TODAY), clients)
    assert found == [("info", "plan.transport")]


def test_hello_world_on_two_nc_a100_nodes_warns_of_tcp_sockets(tmp_path, clients):
    assert _validate(tmp_path, _hello_world()) == [("warning", "distribution.multinode-without-infiniband")]
    assert _plan(tmp_path, _hello_world(PYTORCH_TODAY), clients) == [
        ("warning", "distribution.multinode-without-infiniband")]
    d = next(d for d in validate_files([_write(tmp_path, _hello_world())]))
    assert "TCP sockets on Ethernet (40 Gb/s per VM)" in d.message and "Gb/s of InfiniBand per VM" in d.message
    assert d.hint.startswith("for near-linear scaling use an InfiniBand size (Standard_ND96asr_v4")   # A100 first


def test_hello_world_requiring_infiniband_is_an_error(tmp_path):
    text = _hello_world(PYTORCH_TODAY, cluster_extra="infiniband: required")
    assert ("error", "distribution.multinode-without-infiniband") in _validate(tmp_path, text)
    with pytest.raises(DiagnosticError) as info:   # the plan stops on validate's errors
        load_for_plan(_write(tmp_path, text, live=True))
    assert {d.rule for d in info.value.diagnostics if d.severity == "error"} == {
        "cluster.infiniband-ineligible", "distribution.multinode-without-infiniband"}
