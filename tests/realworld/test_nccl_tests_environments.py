"""azureml-examples' nccl-tests build contexts (tests/realworld/nccl_tests/, sources in its README.md) under its
`gpu_perf` job: none is refused, because each AzureML base image is judged on its own Dockerfile
(validators/base_images.yaml: one row per image of Azure/AzureML-Containers, each citing that image's Dockerfile).
Before, every `mcr.microsoft.com/azureml/openmpi4.1.0-*` image was read as the CPU one, which installs no git, and
`RUN git clone ...` on the GPU image was an error."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from infra_cli.knowledge.base_images import build_knowledge
from infra_cli.stack.load import load_stack
from infra_cli.validate.build_steps import build_step_problems
from infra_cli.validate.engine import validate_stack
from realworld_paste import pasted_stack

HERE = Path(__file__).parent
CONTEXTS = HERE / "nccl_tests"
JOB = HERE / "jobs" / "gpu_perf_job.yml"
GPU_18_04 = "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04"
CPU_22_04 = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"


def _contexts() -> list[str]:
    return sorted(p.name for p in CONTEXTS.iterdir() if (p / "Dockerfile").is_file())


def test_every_context_has_its_source():
    readme = (CONTEXTS / "README.md").read_text(encoding="utf-8")
    names = _contexts()
    assert len(names) >= 5
    for name in names:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}/Dockerfile` |"))
        assert "Azure/azureml-examples" in row and len(row.split("`")[-2]) == 40   # the commit


@pytest.mark.parametrize("context", _contexts())
def test_the_gpu_perf_job_on_each_nccl_tests_context_validates_clean(tmp_path, context):
    (tmp_path / ".git").mkdir()
    shutil.copytree(CONTEXTS / context, tmp_path / "ctx")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "gpu_perf.sh").write_text("#!/bin/bash\nall_reduce_perf -e 8G -f 2 -g 1\n")
    stack = tmp_path / "stack.yaml"
    # a current 8-GPU InfiniBand size: the size the job names (Standard_NC6s_v3) is retired, a verdict of its own
    stack.write_text(pasted_stack(JOB.read_text(encoding="utf-8"), cluster="gpu-cluster", size="Standard_ND96asr_v4",
                                  environment="build: {path: ctx}"), encoding="utf-8")
    found = validate_stack(load_stack(stack))
    assert not [d for d in found if d.severity == "error"], found
    assert not [d for d in found if d.rule == "environment.build-step"], found


def test_each_azureml_image_is_judged_on_its_own_dockerfile():
    k = build_knowledge()
    gpu = k.base(GPU_18_04 + ":latest")
    cpu = k.base(CPU_22_04 + ":latest")
    assert gpu is not None and cpu is not None and gpu.name != cpu.name
    assert {"git", "compiler", "cmake", "mpi-headers"} <= gpu.provides
    assert "git" not in cpu.provides          # the CPU 22.04 image's Dockerfile installs no git
    for base in k.bases:
        if base.name.startswith("azureml-"):
            image = base.name[len("azureml-"):]
            # its own Dockerfile, at a commit: https://github.com/Azure/AzureML-Containers/blob/SHA/base/*/IMAGE/Dockerfile
            assert re.fullmatch(rf"https://github\.com/Azure/AzureML-Containers/blob/[0-9a-f]{{40}}/base/(cpu|gpu)/"
                                rf"{re.escape(image)}/Dockerfile", base.sources[0]), base.sources
            assert k.base(f"mcr.microsoft.com/azureml/{image}@sha256:{'0' * 64}") is base
    # an AzureML image the data does not describe is unknown (refuses nothing), never read as another image
    assert k.base("mcr.microsoft.com/azureml/openmpi4.1.0-cuda12.9-cudnn9-ubuntu24.04:latest") is None


def test_git_clone_is_refused_where_the_image_s_dockerfile_installs_no_git():
    step = "RUN git clone https://github.com/NVIDIA/nccl-tests.git\n"
    assert build_step_problems(f"FROM {GPU_18_04}:latest\n{step}") == []
    [problem] = build_step_problems(f"FROM {CPU_22_04}:latest\n{step}")
    assert "git" in problem.message and "base/cpu/openmpi4.1.0-ubuntu22.04/Dockerfile" in problem.message


def test_a_base_listing_only_part_of_what_it_carries_refuses_no_system_need_it_does_not_list():
    ngc = "FROM nvcr.io/nvidia/pytorch:22.02-py3\n"
    assert build_step_problems(ngc + "RUN git clone https://github.com/NVIDIA/nccl-tests.git\n") == []
    # the same step on a base whose every capability is listed (Ubuntu's own image) is refused
    assert build_step_problems("FROM ubuntu:22.04\nRUN git clone https://github.com/NVIDIA/nccl-tests.git\n")
