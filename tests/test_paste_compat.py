"""Azure ML CLI v2 YAML pastes into a stack unchanged: the public `az ml compute` examples as cluster entries
(tests/fixtures/azureml_examples/, each with its source path), a command job's `distribution:` and
`resources:` blocks as a distribution, enumerated values in any case."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from infra_cli.stack.cluster import AML_DEFAULT_SIZE
from infra_cli.validate.engine import validate_stack

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "fixtures" / "azureml_examples"
HEADER = """\
stack: pasted
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw-pasted, location: eastus}
"""

# The verdict each example gets once pasted (no distribution, so InfiniBand does not come into it):
# rule ids of its diagnostics, all warnings, so every one validates (exit 0).
VERDICTS = {
    "cluster-basic.yml": [],
    "cluster-location.yml": ["cluster.location"],                 # westus beside an eastus workspace
    "cluster-low-priority.yml": [],                               # tier: lowpriority as written
    "cluster-minimal.yml": [],                                    # no size: Azure ML's default
    "cluster-ssh-password.yml": ["cluster.ssh-password-inline"],  # the example writes the password inline
    "cluster-system-identity.yml": [],
    "cluster-user-identity.yml": [],
}


def _pasted(example: Path) -> tuple[str, str]:
    """The example's text indented under `clusters:` with its own name as the key, unchanged otherwise."""
    text = example.read_text(encoding="utf-8")
    name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("name:"))
    return HEADER + f"clusters:\n  {name}:\n" + textwrap.indent(text, "    "), name


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_public_cluster_example_is_a_fixture():
    assert sorted(p.name for p in EXAMPLES.glob("cluster-*.yml")) == sorted(VERDICTS)
    for p in EXAMPLES.glob("cluster-*.yml"):
        assert p.read_text(encoding="utf-8").startswith(
            "# Source: https://github.com/Azure/azureml-examples/blob/main/cli/resources/compute/" + p.name)


@pytest.mark.parametrize("example", sorted(VERDICTS))
def test_public_compute_example_pastes_into_a_cluster(tmp_path, example):
    text, name = _pasted(EXAMPLES / example)
    path = _write(tmp_path, text)
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(path)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    found = json.loads(r.stdout)["diagnostics"]
    assert sorted(d["rule"] for d in found) == sorted(VERDICTS[example])
    assert all(d["severity"] == "warning" and d["line"] and d["hint"] for d in found)
    cluster = load_stack(path).stack.clusters[name]
    assert cluster.type == "amlcompute" and cluster.name == name


def test_minimal_example_gets_azure_mls_default_size(tmp_path):
    text, name = _pasted(EXAMPLES / "cluster-minimal.yml")
    cluster = load_stack(_write(tmp_path, text)).stack.clusters[name]
    assert cluster.size == AML_DEFAULT_SIZE == "Standard_DS3_v2"
    assert (cluster.tier, cluster.min_instances, cluster.max_instances) == ("dedicated", 0, 1)


def test_low_priority_example_reads_as_low_priority(tmp_path):
    text, name = _pasted(EXAMPLES / "cluster-low-priority.yml")
    assert load_stack(_write(tmp_path, text)).stack.clusters[name].tier == "low_priority"


def test_pasted_name_other_than_the_key_is_an_error_at_the_name(tmp_path):
    text, name = _pasted(EXAMPLES / "cluster-basic.yml")
    text = text.replace(f"  {name}:\n", "  gpu:\n", 1)
    diagnostics = validate_stack(load_stack(_write(tmp_path, text)))
    d = next(d for d in diagnostics if d.rule == "cluster.name-mismatch")
    assert d.severity == "error" and d.line == text.splitlines().index("    name: basic-example") + 1


@pytest.mark.parametrize("written, read", [
    ("tier: Dedicated", ("tier", "dedicated")), ("tier: LowPriority", ("tier", "low_priority")),
    ("tier: low_priority", ("tier", "low_priority")), ("type: AmlCompute", ("type", "amlcompute")),
])
def test_cluster_enums_in_any_case(tmp_path, written, read):
    path = _write(tmp_path, HEADER + f"clusters:\n  gpu:\n    size: Standard_ND96asr_v4\n    {written}\n")
    assert getattr(load_stack(path).stack.clusters["gpu"], read[0]) == read[1]


def test_an_unknown_enum_value_is_still_refused(tmp_path):
    path = _write(tmp_path, HEADER + "clusters:\n  gpu:\n    size: Standard_ND96asr_v4\n    tier: Spot\n")
    with pytest.raises(DiagnosticError) as exc:
        load_stack(path)
    assert [(d.rule, d.line) for d in exc.value.diagnostics] == [("stack.invalid", 6)]


# ---- a command job's distribution: and resources: blocks ---------------------------------------------------

DIST_HEAD = HEADER + """\
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  tf:
    curated: azureml:AzureML-tensorflow-2.4-ubuntu18.04-py37-cuda11-gpu:14
distributions:
  train:
    cluster: gpu
    environment: tf
"""


def test_job_blocks_paste_into_a_distribution(tmp_path):
    # the blocks of cli/jobs/single-step/tensorflow/mnist-distributed/job.yml in Azure/azureml-examples
    text = DIST_HEAD + "    resources:\n      instance_count: 2\n    distribution:\n      type: tensorflow\n" \
                       "      worker_count: 2\n"
    dist = load_stack(_write(tmp_path, text)).stack.distributions["train"]
    assert (dist.type, dist.instance_count, dist.worker_count) == ("tensorflow", 2, 2)
    assert dist.distribution is None and dist.resources is None  # read into the flat fields the rules use


def test_nested_values_keep_their_position(tmp_path):
    text = DIST_HEAD + "    resources:\n      instance_count: 3\n    distribution:\n      type: PyTorch\n" \
                       "      process_count_per_instance: 8\n"
    path = _write(tmp_path, text)
    diagnostics = validate_stack(load_stack(path))
    d = next(d for d in diagnostics if d.rule == "distribution.instance-count")  # 3 nodes > max_instances 2
    assert (d.line, d.column) == (text.splitlines().index("      instance_count: 3") + 1, 23)


def test_nested_and_flat_may_agree(tmp_path):
    text = DIST_HEAD + "    type: pytorch\n    distribution:\n      type: PyTorch\n      process_count_per_instance: 8\n"
    assert load_stack(_write(tmp_path, text)).stack.distributions["train"].type == "pytorch"


def test_nested_and_flat_that_disagree_are_an_error_at_the_nested_line(tmp_path):
    text = DIST_HEAD + "    instance_count: 1\n    resources:\n      instance_count: 2\n    distribution:\n" \
                       "      type: mpi\n"
    with pytest.raises(DiagnosticError) as exc:
        load_stack(_write(tmp_path, text))
    [d] = exc.value.diagnostics
    assert (d.rule, d.line, d.column) == ("stack.conflict", text.splitlines().index("      instance_count: 2") + 1, 23)
    assert "instance_count" in d.message and d.hint


def test_unknown_key_in_a_pasted_block_is_named_where_written(tmp_path):
    text = DIST_HEAD + "    resources:\n      instance_count: 2\n      shm_sise: 3g\n    distribution: {type: mpi}\n"
    with pytest.raises(DiagnosticError) as exc:
        load_stack(_write(tmp_path, text))
    [d] = exc.value.diagnostics
    assert (d.rule, d.line) == ("stack.unknown-key", text.splitlines().index("      shm_sise: 3g") + 1)
    assert "shm_size" in d.hint


def test_resources_keys_of_azures_job_schema_paste_in(tmp_path):
    """shm_size, docker_args, ... are keys of azure-ai-ml's resources schema (validators/job_schema.yaml): they
    paste into a distribution as written, and stay in its resources block for the job."""
    text = DIST_HEAD + ("    resources:\n      instance_count: 2\n      shm_size: 3100m\n"
                        "      docker_args: --ipc=host\n      properties: {x: 1}\n    distribution: {type: mpi}\n")
    dist = load_stack(_write(tmp_path, text)).stack.distributions["train"]
    assert dist.instance_count == 2
    assert (dist.resources.shm_size, dist.resources.docker_args, dist.resources.properties) == (
        "3100m", "--ipc=host", {"x": 1})


def test_a_jobs_other_keys_paste_in(tmp_path):
    text = DIST_HEAD + ("    distribution: {type: pytorch}\n    inputs: {epochs: 1, data: {type: uri_folder, path: ./d}}\n"
                        "    outputs: {model: null}\n    limits: {timeout: 600}\n    queue_settings: {job_tier: Spot}\n"
                        "    services: {ssh: {type: ssh, nodes: all}}\n    identity: {type: user_identity}\n"
                        "    tags: {team: ml}\n    display_name: d\n    experiment_name: e\n    description: x\n")
    dist = load_stack(_write(tmp_path, text)).stack.distributions["train"]
    assert set(dist.inputs) == {"epochs", "data"} and dist.outputs == {"model": None}
    assert (dist.limits.timeout, dist.queue_settings.job_tier) == (600, "spot")
    assert (dist.display_name, dist.experiment_name, dist.description, dist.tags) == ("d", "e", "x", {"team": "ml"})


def test_a_job_without_a_distribution_type_pastes_as_one(tmp_path):
    """A command job with no `distribution:` block (azure-ai-ml's command_job_test_msi_identity.yml) has no type: the
    command runs once on each node (distribution.untyped-nodes warns where that is more than one)."""
    dist = load_stack(_write(tmp_path, DIST_HEAD + "    resources: {instance_count: 2}\n")).stack.distributions["train"]
    assert (dist.type, dist.instance_count, dist.distribution) == (None, 2, None)


# ---- infra schema ------------------------------------------------------------------------------------------

def test_schema_accepts_the_pasted_forms():
    r = subprocess.run([sys.executable, "-m", "infra_cli", "schema"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0
    defs = json.loads(r.stdout)["$defs"]
    cluster = defs["Cluster"]["properties"]
    assert {"$schema", "name", "type"} <= set(cluster) and "size" not in defs["Cluster"].get("required", [])
    assert cluster["size"]["default"] == "Standard_DS3_v2"
    dist = defs["Distribution"]["properties"]
    assert {"distribution", "resources"} <= set(dist)
    assert "type" in defs["JobDistribution"]["properties"] and "instance_count" in defs["JobResources"]["properties"]
    assert "key" in cluster["name"]["description"]  # the chosen behaviour: name must equal the key


def test_every_enumerated_value_in_any_case(tmp_path):
    text = HEADER + """\
clusters:
  gpu: {size: Standard_ND96asr_v4, infiniband: Required, tier: DEDICATED, identity: {type: SystemAssigned}}
environments:
  img: {image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04, os_type: Linux}
distributions:
  job: {cluster: gpu, environment: img, type: Mpi, framework: DeepSpeed, launcher: Per-Process}
"""
    stack = load_stack(_write(tmp_path, text)).stack
    gpu, job = stack.clusters["gpu"], stack.distributions["job"]
    assert (gpu.infiniband, gpu.tier, gpu.identity.type) == ("required", "dedicated", "system_assigned")
    assert stack.environments["img"].os_type == "linux"
    assert (job.type, job.framework, job.launcher) == ("mpi", "deepspeed", "per-process")
