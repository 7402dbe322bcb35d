"""Verdicts infra got wrong on files it can express (issue 41): the processes a per-node launcher started several
times per node really starts, a CPU MPI job's GPU finding, low priority on sizes Azure refuses it for, legacy
curated environments and their did-you-mean, and bindings Azure ML does not bind."""

from __future__ import annotations

from rules_fixtures import A100, CURATED_ENV, check, one_distribution


def test_accelerate_started_per_process_counts_each_copy_s_processes(tmp_path):
    """Under process_count_per_instance 8 Azure ML starts the command 8 times per node; each `accelerate launch
    --num_processes 8` (one machine unless --num_machines says otherwise) starts 8: 64, not 8 x 4 = 32."""
    command = "accelerate launch --num_processes 8 train.py"
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\n"
                                                          f"process_count_per_instance: 8\ncommand: {command}\n"))
    d = r.one("distribution.per-node-launcher", "error", f"command: {command}")
    assert "8 x 8 = 64 processes per node" in d.message, d.message
    # and on 2 nodes without --num_machines each node trains alone (accelerate's default, 1 machine)
    n = r.one("distribution.launcher-nodes", "error", f"command: {command}")
    assert "without --num_machines assumes 1 node(s)" in n.message and n.hint == "pass --num_machines 2"
    # told of the 2 machines, each copy starts 8 / 2 = 4 on its node
    told = "accelerate launch --num_processes 8 --num_machines 2 train.py"
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\n"
                                                          f"process_count_per_instance: 8\ncommand: {told}\n"))
    assert "8 x 4 = 32 processes per node" in r.one("distribution.per-node-launcher", "error",
                                                   f"command: {told}").message


DASK = "type: mpi\nprocess_count_per_instance: 1\ninstance_count: 4\ncommand: python startDask.py --script prep.py\n"
CPU_IMAGE = "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04\nconda_file: conda.yml\n"


def test_a_cpu_mpi_job_on_a_cpu_size_is_not_told_it_will_train_on_cpu(tmp_path):
    """Dask-MPI data preparation on general-purpose CPU nodes, FROM the AzureML CPU base image, installing no GPU
    framework: a CPU job, as meant (distribution.no-gpus is for a GPU job on a size without GPUs)."""
    (tmp_path / "conda.yml").write_text("dependencies: [python=3.10, {pip: [dask, dask-mpi, mpi4py, pandas]}]\n")
    r = check(tmp_path, one_distribution("Standard_DS15_v2", CPU_IMAGE, DASK))
    assert not r.of("distribution.no-gpus"), r.diagnostics


def test_the_same_job_installing_torch_or_on_a_gpu_image_is_still_told(tmp_path):
    (tmp_path / "conda.yml").write_text("dependencies: [python=3.10, {pip: [torch, dask]}]\n")
    r = check(tmp_path, one_distribution("Standard_DS15_v2", CPU_IMAGE, DASK))
    assert "will train on CPU" in r.one("distribution.no-gpus", "warning", "cluster: gpu").message
    (tmp_path / "conda.yml").write_text("dependencies: [python=3.10, {pip: [dask]}]\n")
    gpu_image = CPU_IMAGE.replace("openmpi4.1.0-ubuntu20.04", "openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04")
    r = check(tmp_path, one_distribution("Standard_DS15_v2", gpu_image, DASK))
    r.one("distribution.no-gpus", "warning", "cluster: gpu")
    r = check(tmp_path, one_distribution("Standard_DS15_v2", CPU_IMAGE, DASK + "framework: ddp\n"))
    assert r.of("distribution.no-gpus")


SKLEARN_024 = "azureml:AzureML-sklearn-0.24-ubuntu18.04-py37-cpu:1"   # azure-ai-ml's dist_job_1/2


def test_the_did_you_mean_stays_within_the_framework_and_device():
    from infra_cli.knowledge.curated import close_names, curated_registries, name_kind

    names = [r.name for r in curated_registries()["azureml"]]
    assert name_kind("AzureML-sklearn-0.24-ubuntu18.04-py37-cpu") == ("sklearn", "cpu")
    assert name_kind("acpt-pytorch-2.8-cuda12.6") == ("pytorch", "gpu")
    offered = close_names("AzureML-sklearn-0.23-ubuntu18.04-py37-cpu", names)
    assert offered and all(name_kind(n)[0] == "sklearn" and name_kind(n)[1] in ("cpu", None) for n in offered)
    # the TensorFlow GPU name shares most of its letters ("-ubuntu18.04-py37-"), and is never offered
    assert not [n for n in close_names("AzureML-sklearn-0.22-ubuntu18.04-py37-cpu", names) if "tensorflow" in n]
    assert close_names("AzureML-pytorch-1.9-ubuntu18.04-py37-cuda11-gpu", names) == ["AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu"]


def test_the_legacy_curated_environments_the_sdk_s_tests_use_resolve_on_the_local_registry(tmp_path, clients):
    from test_registry_environments import STACK

    from infra_cli.azure.provider import AzureProvider
    from infra_cli.plan.engine import plan_stack
    from infra_cli.stack.load import load_stack

    path = tmp_path / "stack.yaml"
    for reference in (SKLEARN_024, "azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu:33"):
        path.write_text(STACK.replace("CURATED", reference))
        outcome = plan_stack(load_stack(path), AzureProvider(clients))
        assert not [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"], reference
    path.write_text(STACK.replace("CURATED", SKLEARN_024.replace("0.24", "0.23")))
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    (error,) = [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"]
    assert error.hint.startswith("did you mean azureml:AzureML-sklearn-0.24-ubuntu18.04-py37-cpu:1"), error.hint
    assert "tensorflow" not in error.hint, error.hint


def test_a_size_refused_low_priority_needs_its_source(tmp_path, monkeypatch):
    import shutil

    from infra_cli.diagnostics import DiagnosticError
    from infra_cli.knowledge.skus import load_catalog
    from infra_cli.paths import validators_dir

    copy = tmp_path / "validators"
    shutil.copytree(validators_dir(), copy)
    text = (copy / "skus.yaml").read_text(encoding="utf-8")
    (copy / "skus.yaml").write_text(text.replace("    low_priority_source: >-\n", "    low_priority_note: >-\n", 1))
    monkeypatch.setenv("INFRA_VALIDATORS_DIR", str(copy))
    try:
        load_catalog()
        raised = None
    except DiagnosticError as exc:
        raised = exc
    assert raised is not None and "low_priority_source" in str(raised.diagnostics[0].message)


def test_a_single_brace_binding_in_a_stack_is_told_the_binding_and_the_escape(tmp_path):
    """In a stack file ${inputs.x} is the stack language's own interpolation, and not a valid name: the hint says
    what Azure ML binds (${{inputs.x}}) and the escape for a literal dollar sign."""
    from infra_cli.diagnostics import DiagnosticError
    from infra_cli.stack.load import load_stack

    body = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                            "inputs: {data: 1}\ncommand: python train.py --data ${inputs.data}\n")
    path = tmp_path / "stack.yaml"
    from rules_fixtures import HEADER
    path.write_text(HEADER + body, encoding="utf-8")
    try:
        load_stack(path)
        raised = None
    except DiagnosticError as exc:
        raised = exc
    assert raised is not None
    [d] = raised.diagnostics
    assert d.rule == "stack.interpolation" and "${{inputs.data}}" in d.hint and "$$" in d.hint
