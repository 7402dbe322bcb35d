"""A ray distribution's smoke and a job without a distribution type, on the local emulator for real (issue 41).

Ray: the emulator starts `ray start --head` before the command, which runs on the first node only (Azure ML's ray
distribution); the smoke joins that cluster and runs a task on its node. Where the job's Python has no Ray the smoke
is INCOMPLETE, saying Ray is not installed and how to install it; where it has Ray (`pip install 'ray[default]'`;
INFRA_REQUIRE_RAY=1 makes its absence a failure) the smoke passes. No type: one node, the command's own launcher
(torchrun --standalone) starts its processes, and no `distribution:` block is written or submitted.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

from test_smoke_frameworks import TWO_GPU_SIZE, assert_passed, judged, need, smoke, write_stack

pytestmark = pytest.mark.runs_jobs   # jobs on the emulator: scheduled first (tests/conftest.py)

RAY = {"cluster": "gpu2", "environment": "acpt", "distribution": {"type": "ray", "include_dashboard": False},
       "resources": {"instance_count": 2}}
CLUSTERS = {"gpu2": {"size": TWO_GPU_SIZE, "max_instances": 2}}


def _ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def test_a_ray_smoke_without_ray_is_incomplete_and_says_how_to_install_it(tmp_path):
    if _ray_installed():
        pytest.skip("ray is installed here: test_a_ray_smoke_runs_ray_where_it_is_installed runs it")
    stack = write_stack(tmp_path / "stack.yaml", "ray-smoke", CLUSTERS, {"ray": RAY})
    verdict = smoke(stack, tmp_path)["ray"]
    assert not verdict["passed"] and "ray is not importable here" in verdict["incomplete"], verdict
    finding = verdict["findings"][0]
    assert "Ray is not installed where the job ran" in finding["cause"], finding
    assert "pip install 'ray[default]'" in finding["fix"], finding
    got = judged(verdict)
    assert got["check.preflight"][0][0] == "skipped" and not [j for j in verdict["judgements"] if j["outcome"] == "fail"
                                                              and j["name"] != "job"]


def test_a_ray_smoke_runs_ray_where_it_is_installed(tmp_path):
    if not _ray_installed():
        if os.environ.get("INFRA_REQUIRE_RAY") == "1":
            pytest.fail("ray must be installed here (INFRA_REQUIRE_RAY=1): pip install 'ray[default]'")
        pytest.skip("ray is not installed (pip install -e '.[frameworks]', or pip install 'ray[default]')")
    stack = write_stack(tmp_path / "stack.yaml", "ray-smoke", CLUSTERS, {"ray": RAY})
    got = assert_passed(smoke(stack, tmp_path)["ray"])
    assert got["check.ray_init"][0][0] == "pass" and "joined Ray" in got["check.ray_init"][0][1]
    assert got["check.tasks"] == [("pass", "1 of 1 node(s) ran a task")]
    # one machine: one Ray node stands for the job's 2, said rather than judged
    assert got["check.nodes"][0][0] == "skipped" and "2 emulated node(s)" in got["check.nodes"][0][1]


def test_a_job_without_a_distribution_type_smokes_on_one_node(tmp_path):
    need("torch")
    single = {"cluster": "gpu2", "environment": "acpt", "command": "torchrun --standalone --nproc_per_node 2 train.py"}
    stack = write_stack(tmp_path / "stack.yaml", "untyped-smoke", CLUSTERS, {"single": single})
    got = assert_passed(smoke(stack, tmp_path)["single"])
    assert got["check.launch"][0][1].startswith("torchrun launch: rank 0 of 2")
    assert "instance_count 1 x 2 processes per node" in got["check.world_size"][0][1]


def test_the_rendered_jobs_of_both_load_in_azure_ai_ml(tmp_path):
    """`infra render`: the ray job with its distribution block as azure-ai-ml's RayDistribution reads it, the job
    without a type with no distribution block at all."""
    pytest.importorskip("azure.ai.ml")
    from azure.ai.ml import load_job

    from infra_cli.apply.files import render_stack

    single = {"cluster": "gpu2", "environment": "acpt", "command": "python preprocess.py"}
    ray = {**RAY, "distribution": {"type": "ray", "port": 6380, "include_dashboard": True, "dashboard_port": 8266,
                                   "head_node_additional_args": "--disable-usage-stats",
                                   "worker_node_additional_args": "--disable-usage-stats"}, "command": "python tune.py"}
    stack = write_stack(tmp_path / "stack.yaml", "rendered", CLUSTERS, {"ray": ray, "single": single})
    render_stack(stack, tmp_path / "out")
    for name in ("smoke-job.yml", "train-job.yml"):
        text = (tmp_path / "out" / "jobs" / "ray" / name).read_text(encoding="utf-8")
        assert yaml.safe_load(text)["distribution"] == {"type": "ray", **({} if name == "smoke-job.yml" else {}),
                                                        **ray["distribution"]}
        job = load_job(tmp_path / "out" / "jobs" / "ray" / name)
        assert type(job.distribution).__name__ == "RayDistribution" and job.distribution.port == 6380
        assert job.distribution.worker_node_additional_args == "--disable-usage-stats"
        untyped = tmp_path / "out" / "jobs" / "single" / name
        assert "distribution" not in yaml.safe_load(untyped.read_text(encoding="utf-8"))
        assert load_job(untyped).distribution is None


def test_the_sdk_submits_what_render_writes(tmp_path):
    """The job the smoke submits through azure-ai-ml (azure/jobs.py sdk_command_job) carries the same distribution
    as the rendered file: a RayDistribution with the stack's keys, or none."""
    pytest.importorskip("azure.ai.ml")
    from infra_cli.azure.jobs import sdk_command_job
    from infra_cli.knowledge.skus import load_catalog
    from infra_cli.smoke.spec import smoke_job
    from infra_cli.stack.load import load_stack

    single = {"cluster": "gpu2", "environment": "acpt", "command": "python preprocess.py"}
    ray = {**RAY, "distribution": {"type": "ray", "port": 6380, "head_node_additional_args": "--num-cpus 4"}}
    loaded = load_stack(write_stack(tmp_path / "stack.yaml", "sdk", CLUSTERS, {"ray": ray, "single": single}))
    job = sdk_command_job(smoke_job(loaded, "ray", load_catalog(), {}).spec, Path(tmp_path))
    assert job.distribution._to_rest_object().as_dict() == {"distributionType": "Ray", "port": 6380,
                                                            "headNodeAdditionalArgs": "--num-cpus 4"}
    assert sdk_command_job(smoke_job(loaded, "single", load_catalog(), {}).spec, Path(tmp_path)).distribution is None
