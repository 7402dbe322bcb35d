"""azure-ai-ml's own test files (tests/realworld/sdk/, verbatim; sources in its README.md): the AmlCompute files,
the distributed command jobs and the environments of sdk/ml/azure-ai-ml/tests/test_configs, each with the verdict
the SDK's own tests give it (a file an SDK test expects to fail is invalid). Pasted into a stack as the README says,
infra's verdict is the SDK's, or differs for the reason written beside it; a valid file renders to files that the
installed azure-ai-ml loads.

Sizes: the SDK's jobs name `azureml:testCompute`, a placeholder; it is pasted as a cluster of Azure ML's default
size (Standard_DS3_v2, CPU), as `az ml compute create` makes one without --size.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from infra_cli.apply.files import render_stack
from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from infra_cli.stack.cluster import AML_DEFAULT_SIZE
from infra_cli.validate.engine import validate_stack
from realworld_paste import HEADER, pasted_stack

pytestmark = pytest.mark.filterwarnings("ignore:.*:marshmallow.warnings.Marshmallow4Warning")

SDK = Path(__file__).parent / "sdk"
ENTITY = "sdk/ml/azure-ai-ml/tests/compute/unittests/test_compute_entity.py"
JOB_SCHEMA = "sdk/ml/azure-ai-ml/tests/command_job/unittests/test_command_job_schema.py"
ENV_SCHEMA = "sdk/ml/azure-ai-ml/tests/environment/unittests/test_environment_schema.py"
JOB_E2E = "sdk/ml/azure-ai-ml/tests/command_job/e2etests/test_command_job.py"
LOADS = "the installed azure-ai-ml loads it"
REFUSES = "the installed azure-ai-ml refuses it"


# file -> (the SDK's verdict: loads, the SDK test that says so, infra's errors as written)
COMPUTE = {
    "compute-aml.yaml": (True, f"{ENTITY} test_compute_from_yaml", []),
    "compute-aml-no-identity.yaml": (True, LOADS, []),
    "compute-aml-no-public-ip.yaml": (True, f"{ENTITY} test_compute_no_public_ip_from_yaml", []),
    "compute-aml-disable-public-access.yaml": (True, LOADS, []),
    "compute-aml-public-access-no-ssh.yaml": (True, LOADS, []),
    # enable_batch_private_link is no AmlCompute key of azure-ai-ml 1.35 ("Unknown field"): refused alike
    "compute-aml-private-link.yaml": (False, REFUSES, ["stack.unknown-key"]),
}
JOBS = {
    "dist_job_1.yml": (True, f"{JOB_SCHEMA} test_distributions_roundtrip", []),
    "dist_job_2.yml": (True, f"{JOB_SCHEMA} test_distributions_roundtrip", []),
    # differs: the SDK's test checks the schema's round trip only. 3 workers + 3 parameter servers on 2 nodes put
    # two TensorFlow processes of one role on a node, which infra refuses (distribution.tensorflow-counts says why)
    "dist_job_3.yml": (True, f"{JOB_SCHEMA} test_distributions_roundtrip", ["distribution.tensorflow-counts"]),
    "dist_job_bad.yml": (False, f"{JOB_SCHEMA} test_invalid_distribution_config", ["distribution.tensorflow-counts"]),
    # `torch.distributed` is no distribution type of azure-ai-ml 1.35 (pytorch, mpi, tensorflow, ray)
    "dist_job_pytorch_torch_distributed.yml": (False, REFUSES, ["stack.invalid"]),
    # Ray (issue 41): its keys in the distribution block; a job joining a Ray cluster at an address; the e2e job
    # Azure runs to completion (its environment inline: an image)
    "dist_job_ray_1.yml": (True, LOADS, []),
    "dist_job_ray_2.yml": (True, LOADS, []),
    "command_job_dist_ray.yml": (True, f"{JOB_E2E} test_ray_command_job", []),
    # no distribution: one node, the command as written
    "command_job_test_msi_identity.yml": (True, LOADS, []),
    # serverless (issue 41): no compute:, queue_settings' job_tier; the e2e test Azure runs it in
    "command_job_test_serverless.yml": (True, f"{JOB_E2E} test_command_job_serverless", []),
    # a Singularity virtual cluster by its ARM id (with and without azureml:): a compute infra does not manage,
    # whose instance_type (Singularity.NC6_v3, AISupercomputer.D1) is the virtual cluster's, not a VM size
    "command_job_singularity_test.yml": (True, LOADS, []),
    "command_job_with_virtualcluster.yaml": (True, LOADS, []),
}
ENVIRONMENTS = {
    "environment_conda.yml": (True, f"{ENV_SCHEMA} test_yaml_load", []),
    "environment_conda_inline.yml": (True, LOADS, []),   # conda_file inline: a mapping
    "environment_conda_bad.yml": (False, f"{ENV_SCHEMA} test_yaml_load_anonymous_bad", ["stack.unknown-key"]),
    "environment_docker_image.yml": (True, LOADS, []),
    "environment_docker_context.yml": (True, f"{ENV_SCHEMA} test_docker_context", []),
    # issue 41: inference_config passed through; a build context at a URL, never looked up on this machine
    "environment_docker_inference.yml": (True, f"{ENV_SCHEMA} test_yaml_with_inference_config", []),
    "environment_docker_context_remote_path.yml": (True, LOADS, []),
}
# Where infra's verdict differs from the SDK's, and why (the comments above say it at length).
DIFFERENCES = {"dist_job_3.yml"}
ALL = {**{("compute", k): v for k, v in COMPUTE.items()}, **{("jobs", k): v for k, v in JOBS.items()},
       **{("environment", k): v for k, v in ENVIRONMENTS.items()}}


def _sdk_loads(kind: str, path: Path) -> bool:
    from azure.ai.ml import load_compute, load_environment, load_job

    loader = {"compute": load_compute, "jobs": load_job, "environment": load_environment}[kind]
    try:
        loader(path)
    except Exception:  # marshmallow's ValidationError or azure-ai-ml's own: a refusal either way
        return False
    return True


def _name(text: str) -> str:
    return next(line.split(":", 1)[1].strip().strip('"') for line in text.splitlines() if line.startswith("name:"))


def _project(tmp_path: Path, kind: str, fixture: str) -> tuple[Path, str]:
    """The fixture pasted into a stack as the README says: a compute file under `clusters:` and an environment
    file under `environments:`, each by its own name; a job's keys into a distribution, its compute a cluster of
    Azure ML's default size and its environment an environments entry."""
    shutil.copytree(SDK / kind, tmp_path, dirs_exist_ok=True)   # what the files name beside them
    text = (SDK / kind / fixture).read_text(encoding="utf-8")
    if kind == "jobs":
        named = re.search(r"^environment: (\S+)", text, re.MULTILINE)
        # a named environment is curated; one written inline (its image) is an environments entry as written
        environment = f'curated: "{named.group(1)}"' if named else \
            yaml.safe_dump(yaml.safe_load(text)["environment"], sort_keys=False)
        # the SDK's placeholder compute is a cluster; a job without `compute:` runs on serverless compute (no
        # cluster); any other compute (a Singularity virtual cluster's ARM id) is one infra does not manage
        compute = re.search(r"^compute: (.+)$", text, re.MULTILINE)
        placeholder = compute is not None and compute.group(1) == "azureml:testCompute"
        stack = pasted_stack(text, cluster="testCompute" if placeholder else None, size=AML_DEFAULT_SIZE,
                             environment=environment, compute=None if placeholder or compute is None else compute.group(1))
        name = "job"
    else:
        name = _name(text)
        section = "clusters" if kind == "compute" else "environments"
        stack = HEADER + f"{section}:\n  {name}:\n" + textwrap.indent(text, "    ") + "\n"
    path = tmp_path / "stack.yaml"
    path.write_text(stack, encoding="utf-8")
    return path, name


def _errors(path: Path) -> list:
    try:
        found = validate_stack(load_stack(path))
    except DiagnosticError as exc:
        found = exc.diagnostics
    return [d for d in found if d.severity == "error"]


def test_every_file_has_a_verdict_and_a_source():
    readme = (SDK / "README.md").read_text(encoding="utf-8")
    for kind, table in (("compute", COMPUTE), ("jobs", JOBS), ("environment", ENVIRONMENTS)):
        files = sorted(p.name for p in (SDK / kind).iterdir() if p.is_file())
        assert files == sorted(table), kind
        for name in files:
            row = next(line for line in readme.splitlines() if line.startswith(f"| `{kind}/{name}` |"))
            assert f"sdk/ml/azure-ai-ml/tests/test_configs/{'command_job' if kind == 'jobs' else kind}/{name}" in row
            assert len(row.split("`")[-2]) == 40  # the commit


@pytest.mark.parametrize("kind, fixture", sorted(ALL))
def test_the_sdk_verdict_is_the_installed_sdks(kind, fixture):
    """The verdict recorded from the SDK's tests is what the installed azure-ai-ml says of the file."""
    pytest.importorskip("azure.ai.ml")
    assert _sdk_loads(kind, SDK / kind / fixture) is ALL[(kind, fixture)][0]


@pytest.mark.parametrize("kind, fixture", sorted(ALL))
def test_infras_verdict_is_the_sdks_or_documented(tmp_path, kind, fixture):
    valid, _, expected = ALL[(kind, fixture)]
    path, _ = _project(tmp_path, kind, fixture)
    errors = _errors(path)
    assert sorted({d.rule for d in errors}) == sorted(expected), errors
    assert all(d.line and d.hint for d in errors)
    assert (not expected) == valid or fixture in DIFFERENCES


@pytest.mark.parametrize("kind, fixture", sorted(k for k, v in ALL.items() if v[0] and not v[2]))
def test_a_valid_file_renders_to_files_the_sdk_loads(tmp_path, kind, fixture):
    path, name = _project(tmp_path, kind, fixture)
    assert not _errors(path)
    written, _ = render_stack(path, tmp_path / "out")
    rendered = {"compute": tmp_path / "out" / "clusters" / f"{name}.yml",
                "environment": tmp_path / "out" / "environments" / f"{name}.yml",
                "jobs": tmp_path / "out" / "jobs" / name / "train-job.yml"}[kind]
    assert rendered in written
    assert _sdk_loads(kind, rendered), rendered.read_text(encoding="utf-8")
