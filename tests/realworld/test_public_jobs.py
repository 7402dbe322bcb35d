"""The public distributed command jobs of Azure/azureml-examples (tests/realworld/jobs/, sources in its
README.md), pasted into stacks as the README says, each with the verdict Azure's documentation gives it; the
valid ones render to job files azure-ai-ml's own `load_job` accepts.

Sizes are the ones each example's instructions create: `gpu-cluster` is `az ml compute create -n gpu-cluster
--size Standard_NC12` in the repository's setup scripts (cli/setup.sh), `nc24-k80` names Standard_NC24,
gpu_perf_job.yml asks for `instance_type: Standard_NC6s_v3`, the nebulaml jobs run 4 processes per node on
4-GPU V100 nodes (Standard_NC24rs_v3), the Bert-Pretrain best practice runs 8 per node on ND A100 v4
(Standard_ND96amsr_A100_v4), and dask's `cpu-cluster-lg` is a general-purpose Standard_DS15_v2. NC, NCv3
and NCv3's RDMA sizes are retired (https://learn.microsoft.com/azure/virtual-machines/sizes/retirement/retired-sizes-list),
so those jobs are refused as written; on today's 8-GPU ND A100 v4 the same job validates and renders.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra_cli.apply.files import render_stack
from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from infra_cli.validate.engine import validate_stack
from realworld_paste import HEADER, pasted_stack

JOBS = Path(__file__).parent / "jobs"
ACPT = "curated: azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"
OPENMPI_CUDA = "image: mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04"
PYTORCH_19 = "curated: azureml:AzureML-pytorch-1.9-ubuntu18.04-py37-cuda11-gpu"
TF_24 = "curated: azureml:AzureML-tensorflow-2.4-ubuntu18.04-py37-cuda11-gpu"
TODAY = "Standard_ND96asr_v4"  # a current 8-GPU InfiniBand size
# 2 nodes, retired, no InfiniBand: the retirement is the error; TCP sockets between the nodes are a warning (the
# guides present InfiniBand as what makes scaling linear, not as a condition for running)
NC12 = ["cluster.size-retired"]
SERVICES = ["distribution.job-key"]
RETIRED = ("Standard_NC12", "Standard_NC24", "Standard_NC6s_v3", "Standard_NC24rs_v3")

# fixture: (cluster name, size as its docs intend, environment entry, error rules as written)
VERDICTS = {
    "pytorch-cifar-distributed.yml": ("gpu-cluster", "Standard_NC12", f"{PYTORCH_19}:6", NC12),
    "pytorch-cifar-distributed-typed-input.yml": ("gpu-cluster", "Standard_NC12", f"{PYTORCH_19}@latest", NC12),
    "tensorflow-mnist-distributed-horovod.yml": ("gpu-cluster", "Standard_NC12", f"{TF_24}@latest", NC12),
    "tensorflow-mnist-distributed.yml": ("gpu-cluster", "Standard_NC12", f"{TF_24}:14", NC12),
    "gpu_perf_job.yml": ("nc6s-v3", "Standard_NC6s_v3", OPENMPI_CUDA, ["cluster.size-retired"]),
    "gpu_diag_job.yaml": ("nc24-k80", "Standard_NC24", OPENMPI_CUDA, ["cluster.size-retired"]),
    # `code: {local_path: src}` is the retired preview form: today's schema takes a path (stack.invalid at code)
    "gpu_perf_job.yaml": ("gpu-cluster", "Standard_NC12", OPENMPI_CUDA, ["stack.invalid"]),
    "nebulaml-bert-pretrain-deepspeed.yml": ("v100-cluster", "Standard_NC24rs_v3", ACPT, ["cluster.size-retired"]),
    "nebulaml-bert-pretrain.yml": ("v100-cluster", "Standard_NC24rs_v3", ACPT, ["cluster.size-retired"]),
    "nebulaml-cifar10-deepspeed.yml": ("v100-cluster", "Standard_NC24rs_v3", ACPT, ["cluster.size-retired"]),
    # services written with the preview schema's `job_service_type`: azure-ai-ml 1.35 refuses the file
    # ("Unknown field"); with `type`, as the hint says, the job is valid
    "bert-pretrain-submit.yml": ("a100-cluster", "Standard_ND96amsr_A100_v4", ACPT, SERVICES),
    "bert-pretrain-deepspeed-submit.yml": ("a100-cluster", "Standard_ND96amsr_A100_v4", ACPT, SERVICES),
    # Dask talks TCP between CPU nodes, as CPU jobs do: no InfiniBand finding
    "dask-nyctaxi.yml": ("cpu-cluster-lg", "Standard_DS15_v2",
                         "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04\nconda_file: conda.yml", []),
}


# What each refusal's hint says to change, applied to the pasted text (for the render check).
FIXES = [("job_service_type:", "type:"), ("code: \n  local_path: src", "code: src")]


def _project(tmp_path: Path, fixture: str, *, fixed: bool = False) -> Path:
    cluster, size, environment, errors = VERDICTS[fixture]
    text = (JOBS / fixture).read_text(encoding="utf-8")
    if fixed:
        size = TODAY if size in RETIRED else size
        for old, new in FIXES:
            text = text.replace(old, new)
    extra = ""
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "train.py").write_text("print('train')\n", encoding="utf-8")
    (tmp_path / "conda.yml").write_text("dependencies: [python=3.10]\n", encoding="utf-8")
    path = tmp_path / "stack.yaml"
    path.write_text(pasted_stack(text, cluster=cluster, size=size, environment=environment, cluster_extra=extra),
                    encoding="utf-8")
    return path


def _diagnostics(path: Path) -> list:
    try:
        return validate_stack(load_stack(path))
    except DiagnosticError as exc:  # the model refused the stack: its diagnostics are the verdict
        return exc.diagnostics


def test_every_fixture_has_a_verdict_and_a_source():
    fixtures = sorted(p.name for p in JOBS.iterdir() if p.suffix in (".yml", ".yaml"))
    assert fixtures == sorted(VERDICTS) and len(fixtures) >= 12
    readme = (JOBS / "README.md").read_text(encoding="utf-8")
    for name in fixtures:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        assert "Azure/azureml-examples" in row and len(row.split("`")[-2]) == 40  # the commit


@pytest.mark.parametrize("fixture", sorted(VERDICTS))
def test_public_job_gets_its_documented_verdict(tmp_path, fixture):
    found = _diagnostics(_project(tmp_path, fixture))
    errors = sorted({d.rule for d in found if d.severity == "error"})
    assert errors == VERDICTS[fixture][3], found
    assert not [d for d in found if d.rule == "stack.unknown-key"], found  # every key of Azure's schema is read
    assert all(d.line and d.hint for d in found if d.severity == "error")


def _load_job(path: Path):
    azure_ml = pytest.importorskip("azure.ai.ml")
    return azure_ml.load_job(path)


@pytest.mark.parametrize("fixture", sorted(VERDICTS))
def test_public_job_as_its_hints_fix_it_renders_a_file_azure_ai_ml_loads(tmp_path, fixture):
    """Valid as written, or once fixed as its diagnostics' hints say (a current size, `type` for a service's
    `job_service_type`, `code: src`): validate has no error, and `infra render`'s job file loads in azure-ai-ml."""
    path = _project(tmp_path, fixture, fixed=True)
    assert not [d for d in _diagnostics(path) if d.severity == "error"]
    written, _ = render_stack(path, tmp_path / "out")
    job_file = tmp_path / "out" / "jobs" / "job" / "train-job.yml"
    assert job_file in written
    job = _load_job(job_file)
    pasted = load_stack(path).stack.distributions["job"]
    # what the example declares reaches the job Azure ML receives
    assert set(job.inputs or {}) == set(pasted.inputs) and set(job.outputs or {}) == set(pasted.outputs)
    assert job.experiment_name == (pasted.experiment_name or job.experiment_name)
    assert job.display_name == (pasted.display_name or job.display_name)
    assert set(job.services or {}) == set(pasted.services)
    if pasted.resources is not None and pasted.resources.shm_size:
        assert job.resources.shm_size == pasted.resources.shm_size
    assert job.resources.instance_count == pasted.instance_count


@pytest.mark.parametrize("fixture", sorted(VERDICTS))
def test_public_job_as_its_hints_fix_it_plans_clean_on_the_emulator(tmp_path, fixture, clients):
    """`infra plan --local`'s engine on the fixed job: the live checks (the size offered in the region, Azure
    ML's quota, the curated environment resolved in the `azureml` registry) find no error either, but for the
    pytorch-1.9 curated environment, which today's registry (validators/curated_environments.yaml) no longer
    lists: a job naming it is refused by Azure ML as well."""
    from emulator_fixtures import WORKSPACE_YAML

    from infra_cli.azure.provider import AzureProvider
    from infra_cli.plan.engine import plan_stack

    path = _project(tmp_path, fixture, fixed=True)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(HEADER.splitlines()[1] + "\n", WORKSPACE_YAML), encoding="utf-8")
    plan = plan_stack(load_stack(path), AzureProvider(clients)).plan
    errors = sorted(d.rule for d in plan.diagnostics if d.severity == "error")
    assert errors == (["plan.environment-not-found"] if PYTORCH_19 in VERDICTS[fixture][2] else []), plan.diagnostics
    assert f"cluster.{VERDICTS[fixture][0]}" in {c.address for c in plan.changes}
