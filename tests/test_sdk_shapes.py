"""The shapes azure-ai-ml takes, taken as it takes them.

- `conda_file:` is a path or the conda YAML inline (azure-ai-ml's Environment takes a dict; the environment YAML
  reference, https://learn.microsoft.com/azure/machine-learning/reference-yaml-environment, "the path to the
  conda file, or the inline YAML"): the inline form validates, is hashed as its content, renders to a file that
  load_environment reads back as the same mapping, and registers on the emulator through the SDK.
- A job's inputs (https://learn.microsoft.com/azure/machine-learning/reference-yaml-job-command#job-inputs) are
  refused at validate exactly where azure-ai-ml's load_job refuses them: the verdict of every shape below is
  load_job's own, asked in the test (a component's `{type: integer}` pasted into a job is one it refuses).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from emulator_fixtures import WORKSPACE_YAML

from infra_cli.apply.files import render_stack
from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.desired import desired_resources
from infra_cli.stack.load import load_stack
from infra_cli.validate.engine import validate_stack

pytestmark = pytest.mark.filterwarnings("ignore:.*:marshmallow.warnings.Marshmallow4Warning")

CONDA = {"name": "train", "channels": ["conda-forge"],
         "dependencies": ["python=3.10", "pip", {"pip": ["torch==2.2.0", "deepspeed"]}]}

INLINE = f"""\
stack: inline
{WORKSPACE_YAML}clusters:
  gpu: {{size: Standard_ND96asr_v4, max_instances: 2}}
environments:
  env:
    image: mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04
    conda_file:
      name: train
      channels: [conda-forge]
      dependencies:
        - python=3.10
        - pip
        - pip: [torch==2.2.0, deepspeed]
"""


def _stack(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _diagnostics(path: Path) -> list:
    try:
        return validate_stack(load_stack(path))
    except DiagnosticError as exc:
        return exc.diagnostics


def _environment(path: Path) -> dict:
    (env,) = [r for r in desired_resources(load_stack(path)) if r.type == "environment"]
    return env.attributes


def test_an_inline_conda_file_validates(tmp_path):
    found = _diagnostics(_stack(tmp_path, INLINE))
    assert [d for d in found if d.severity == "error"] == [], found
    assert load_stack(tmp_path / "stack.yaml").stack.environments["env"].conda_file == CONDA


def test_an_inline_conda_file_is_hashed_as_its_content(tmp_path):
    inline = _environment(_stack(tmp_path, INLINE))
    rendered = render_stack(tmp_path / "stack.yaml", tmp_path / "out")[0]
    conda = tmp_path / "out" / "environments" / "env" / "conda.yml"
    assert conda in rendered
    assert inline["conda_sha256"] == hashlib.sha256(conda.read_bytes()).hexdigest()
    changed = _environment(_stack(tmp_path, INLINE.replace("torch==2.2.0", "torch==2.3.0")))
    assert changed["conda_sha256"] != inline["conda_sha256"] and changed["content_hash"] != inline["content_hash"]


def test_an_inline_conda_file_renders_to_a_file_azure_ai_ml_loads(tmp_path):
    from azure.ai.ml import load_environment

    render_stack(_stack(tmp_path, INLINE), tmp_path / "out")
    env_file = tmp_path / "out" / "environments" / "env.yml"
    assert yaml.safe_load(env_file.read_text(encoding="utf-8"))["conda_file"] == "env/conda.yml"
    assert load_environment(env_file).conda_file == CONDA


def test_an_inline_conda_file_is_evidence_of_what_it_installs(tmp_path):
    """DeepSpeed under MPI needs deepspeed and mpi4py: the inline file lists deepspeed, not mpi4py, and the
    hint says to add mpi4py there."""
    text = INLINE.replace("image: mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04",
                          "image: x.azurecr.io/train:1\n    requires: [openmpi>=4.1]") + \
        "distributions:\n  ds: {cluster: gpu, environment: env, type: mpi, framework: deepspeed, instance_count: 2," \
        " process_count_per_instance: 8}\n"
    found = [d for d in _diagnostics(_stack(tmp_path, text)) if d.rule == "distribution.packages-missing"]
    (d,) = found
    assert "mpi4py" in d.message and "deepspeed" not in d.message.split("carry", 1)[1]
    assert "inline conda_file" in d.hint


@pytest.mark.parametrize("value", ["[python=3.10]", "42", "''"])
def test_a_conda_file_that_is_neither_a_path_nor_a_mapping_is_refused(tmp_path, value):
    text = INLINE.split("    conda_file:")[0] + f"    conda_file: {value}\n"
    found = _diagnostics(_stack(tmp_path, text))
    assert [d.rule for d in found if d.severity == "error"] == ["stack.invalid"], found
    assert all(d.line == text.splitlines().index(f"    conda_file: {value}") + 1 for d in found)


def test_an_inline_conda_file_registers_through_the_sdk(tmp_path, clients):
    from infra_cli.apply.engine import apply_outcome
    from infra_cli.azure.provider import AzureProvider
    from infra_cli.plan.engine import plan_stack

    path = _stack(tmp_path, INLINE)
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    assert not outcome.plan.has_errors(), outcome.plan.diagnostics
    result = apply_outcome(outcome)
    assert result.ok, result.failures
    env = clients.ml.environments.get("env", version="1")
    assert yaml.safe_load(env.conda_file) == CONDA if isinstance(env.conda_file, str) else env.conda_file == CONDA
    again = plan_stack(load_stack(path), AzureProvider(clients))
    assert not again.plan.changes, again.plan.changes


# ---- job inputs -------------------------------------------------------------------------------------------

# Each shape, as a job's input `x`; the verdict is load_job's (asked below), infra's must be the same.
INPUT_SHAPES = [
    1, 1.5, True, "text", None, [1, 2], {},
    {"type": "integer"}, {"type": "integer", "default": 10}, {"type": "integer", "value": 1}, {"type": "string"},
    {"type": "Integer"}, {"type": "bogus", "value": 1},
    {"value": 1}, {"value": None}, {"value": [1]}, {"value": {"a": 1}}, {"path": "x", "value": 1},
    {"type": "uri_folder"}, {"type": "uri_folder", "path": "azureml:cifar@latest"}, {"path": "azureml:cifar@latest"},
    {"type": "URI_FOLDER", "path": "azureml:cifar@latest"}, {"type": "uri_file", "mode": "download"},
    {"type": "uri_folder", "mode": "RO_MOUNT", "path": "azureml:cifar@latest"},
    {"type": "uri_folder", "mode": "eval_mount", "path": "azureml:cifar@latest"},
    {"type": "mltable", "mode": "eval_mount", "path": "azureml:t:1"}, {"type": "mlflow_model", "path": "azureml:m:1"},
    {"type": "uri_folder", "path": "azureml:cifar@latest", "description": "d"}, {"mode": "download"},
    {"datastore": "workspaceblobstore"},
]


def _load_job_takes(tmp_path: Path, value) -> bool:
    from azure.ai.ml import load_job

    doc = {"command": "python train.py ${{inputs.x}}", "environment": "azureml:AzureML-x@latest",
           "compute": "azureml:gpu", "inputs": {"x": value}}
    path = tmp_path / "job.yml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    try:
        load_job(path)
    except Exception:  # marshmallow's ValidationError, azure-ai-ml's own: a refusal either way
        return False
    return True


JOB = f"""\
stack: inputs
{WORKSPACE_YAML}clusters:
  gpu: {{size: Standard_ND96asr_v4, max_instances: 2}}
environments:
  acpt: {{curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}}
distributions:
  train:
    cluster: gpu
    environment: acpt
    command: python train.py --x ${{{{inputs.x}}}}
    distribution: {{type: pytorch, process_count_per_instance: 8}}
    resources: {{instance_count: 2}}
    inputs:
      x: VALUE
"""


def _job_stack(tmp_path: Path, value) -> Path:
    return _stack(tmp_path, JOB.replace("VALUE", json.dumps(value)))  # JSON is YAML's flow style


@pytest.mark.parametrize("value", INPUT_SHAPES, ids=lambda v: json.dumps(v)[:40])
def test_validate_refuses_an_input_exactly_where_load_job_does(tmp_path, value):
    takes = _load_job_takes(tmp_path, value)
    found = [d for d in _diagnostics(_job_stack(tmp_path, value)) if d.severity == "error"]
    assert [d.rule for d in found] == ([] if takes else ["distribution.job-input"]), found
    for d in found:
        assert d.line >= JOB.splitlines().index("      x: VALUE") + 1 and d.hint


def test_a_components_declaration_pasted_into_a_job_says_how_to_give_the_value(tmp_path):
    """`epochs: {type: integer}` (a component's input) in a job: refused with the fix, at the input."""
    text = JOB.replace("      x: VALUE", "      x:\n        type: integer\n        default: 10")
    (d,) = [d for d in _diagnostics(_stack(tmp_path, text)) if d.severity == "error"]
    assert d.rule == "distribution.job-input" and "{type: integer}" in d.message and "load_job" in d.message
    assert "x: 10" in d.hint and "uri_folder" in d.hint and "path" in d.hint
    assert d.line == text.splitlines().index("        type: integer") + 1
    bare = JOB.replace("      x: VALUE", "      x: {type: integer}")
    (d,) = [d for d in _diagnostics(_stack(tmp_path, bare)) if d.severity == "error"]
    assert "give it its value: x: VALUE" in d.hint


def test_a_refused_input_renders_nothing_and_a_fixed_one_renders_a_job_load_job_takes(tmp_path):
    from azure.ai.ml import load_job

    (tmp_path / "src").mkdir()
    bad = _stack(tmp_path, JOB.replace("      x: VALUE", "      x: {type: integer}"))
    with pytest.raises(DiagnosticError):
        render_stack(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    good = _stack(tmp_path, JOB.replace("      x: VALUE", "      x: 10"))
    render_stack(good, tmp_path / "out")
    job = load_job(tmp_path / "out" / "jobs" / "train" / "train-job.yml")
    assert job.inputs["x"]._data == 10
