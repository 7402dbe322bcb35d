"""Rendered Dockerfiles must build: each RUN step's needs (python3 and pip, a compiler and MPI's and Python's
headers to build mpi4py from source, torch before DeepSpeed) met by the base image or an earlier step
(validate/build_steps.py, validators/base_images.yaml). Judged on a user's build context by `infra validate`,
on a template's rendered Dockerfile by `infra plan` and `infra render`; every shipped stack's passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra_cli.image.dockerfile import render_dockerfile
from infra_cli.knowledge.base_images import build_knowledge
from infra_cli.plan.dockerfile_builds import template_build_diagnostics
from infra_cli.stack.load import load_stack
from infra_cli.validate.build_steps import build_step_problems

ROOT = Path(__file__).resolve().parent.parent
CUDA = "FROM nvcr.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04\n"
PIP = "RUN apt-get update && apt-get install -y --no-install-recommends python3-pip\n"
BUILD_DEPS = "RUN apt-get update && apt-get install -y --no-install-recommends build-essential python3-dev libopenmpi-dev\n"
MPI4PY_FROM_SOURCE = "RUN MPICC=mpicc python3 -m pip install --no-cache-dir --no-binary=mpi4py mpi4py\n"


def problems(text: str) -> list:
    return build_step_problems(text)


def test_mpi4py_from_source_without_a_compiler_or_headers_is_refused_at_its_line():
    [p] = problems(CUDA + PIP + MPI4PY_FROM_SOURCE)
    assert p.line == 3
    for what in ("building mpi4py from source", "a C compiler", "mpicc", "Python.h", "nvcr.io/nvidia/cuda"):
        assert what in p.message, p.message
    assert "apt-get install -y --no-install-recommends build-essential libopenmpi-dev python3-dev" in p.hint


def test_mpi4py_from_source_after_the_compiler_and_headers_is_accepted():
    assert problems(CUDA + PIP + BUILD_DEPS + MPI4PY_FROM_SOURCE) == []
    # in the same RUN, after them: accepted too; before them: refused
    same = CUDA + PIP + BUILD_DEPS.rstrip("\n") + " && " + MPI4PY_FROM_SOURCE[4:]
    assert problems(same) == []
    assert [p.line for p in problems(CUDA + PIP + MPI4PY_FROM_SOURCE + BUILD_DEPS)] == [3]


@pytest.mark.parametrize("install, built", [
    ("pip install mpi4py", False),                              # a binary wheel since 4.1
    ("pip install 'mpi4py>=4.1'", False),
    ("pip install mpi4py==3.1.6", True),                        # no wheel below 4.1: built from source
    ("pip install 'mpi4py<4'", True),
    ("pip install 'mpi4py~=3.1'", True),
    ("pip install --no-binary :all: mpi4py", True),
    ("pip install --no-binary=numpy,mpi4py mpi4py", True),
    ("PIP_NO_BINARY=mpi4py pip install mpi4py", True),
    ("pip install horovod", True),                              # a source distribution only
])
def test_when_pip_builds_from_source(install, built):
    text = CUDA + PIP + "RUN pip install torch\n" + f"RUN {install}\n"
    found = problems(text)
    assert bool(found) == built, found
    if built:
        assert "from source" in found[0].message


def test_deepspeed_before_torch_is_refused_and_after_it_accepted():
    [p] = problems(CUDA + PIP + "RUN python3 -m pip install deepspeed mpi4py\n")
    assert "installing deepspeed needs PyTorch" in p.message and "pip install torch" in p.hint
    # in the same pip command is too late: pip prepares deepspeed before it installs torch
    assert problems(CUDA + PIP + "RUN pip install torch deepspeed\n")
    assert problems(CUDA + PIP + "RUN pip install torch && pip install deepspeed\n") == []
    assert problems(CUDA + PIP + "RUN pip install torch==2.3.1\nRUN pip install deepspeed\n") == []
    assert problems("FROM nvcr.io/nvidia/pytorch:24.05-py3\nRUN pip install deepspeed\n") == []


def test_horovod_needs_a_framework_first():
    [p] = problems(CUDA + PIP + BUILD_DEPS + "RUN pip install horovod\n")
    assert "PyTorch or TensorFlow" in p.message
    assert problems(CUDA + PIP + BUILD_DEPS + "RUN pip install tensorflow\nRUN pip install horovod\n") == []


def test_pip_needs_python_and_pip_and_recommends_count():
    [p] = problems(CUDA + "RUN pip install torch\n")
    assert "a python3 interpreter" in p.message and "pip for python3" in p.message and "python3-pip" in p.hint
    # python3-pip without --no-install-recommends brings build-essential and python3-dev
    text = CUDA + "RUN apt-get update && apt-get install -y python3-pip libopenmpi-dev\n" + MPI4PY_FROM_SOURCE
    assert problems(text) == []


def test_what_cannot_be_read_is_not_refused():
    # an unknown base image: nothing it may carry is refused
    assert problems("FROM registry.example.com/team/base:1\n" + MPI4PY_FROM_SOURCE) == []
    assert problems("ARG BASE\nFROM $BASE\n" + MPI4PY_FROM_SOURCE) == []
    # a requirements file may hold torch (deepspeed not refused) but no compiler (mpi4py still is)
    text = CUDA + PIP + "RUN pip install -r /tmp/requirements.txt\nRUN pip install deepspeed\n" + MPI4PY_FROM_SOURCE
    assert [p.line for p in problems(text)] == [5]
    # a script may install anything
    assert problems(CUDA + PIP + "RUN ./install.sh\n" + MPI4PY_FROM_SOURCE + "RUN pip install deepspeed\n") == []


def test_stages_shells_and_exec_form():
    text = (CUDA.rstrip("\n") + " AS deps\n" + PIP + BUILD_DEPS + "FROM deps\n" + MPI4PY_FROM_SOURCE)
    assert problems(text) == []   # FROM deps starts from what deps ended with
    assert problems(CUDA + 'RUN sh -c "apt-get update; pip install torch"\n')
    assert problems(CUDA + 'RUN ["pip", "install", "torch"]\n')
    assert problems(CUDA + "RUN --mount=type=cache,target=/root/.cache pip install torch\n")
    assert problems(CUDA + "RUN if true; then pip install torch; fi\n")


def test_the_issue_s_rendering_is_refused_and_the_template_s_is_not():
    """The openmpi-rdma template as mpi-deepspeed rendered it before: `pip install deepspeed mpi4py` on the CUDA
    base, with no torch; now torch comes first and mpi4py is built after its compiler and headers."""
    rendered = render_dockerfile("openmpi-rdma", {"pip_packages": ["deepspeed", "mpi4py"]})
    assert problems(rendered) == []
    assert rendered.index("pip install --no-cache-dir torch") < rendered.index("--no-binary=mpi4py mpi4py") < \
        rendered.index("pip install --no-cache-dir deepspeed")
    before = rendered.split("\n# A C compiler")[0] + "\nRUN python3 -m pip install --no-cache-dir deepspeed mpi4py\n"
    assert [p.message.split(":")[0] for p in problems(before)] == ["RUN `python3 -m pip install --no-cache-dir "
                                                                   "deepspeed mpi4py` cannot run"]


@pytest.mark.parametrize("params", [
    {}, {"pip_packages": ["deepspeed"]}, {"pip_packages": ["torch==2.3.1", "deepspeed", "mpi4py==3.1.6"]},
    {"pip_packages": ["torch", "horovod"]}, {"openmpi_source": "4.1.6", "pip_packages": ["deepspeed"]},
    {"nccl_rdma_sharp_plugin": True, "hpcx_url": "https://example.com/hpcx.tbz", "pip_packages": ["transformers"]},
])
def test_the_template_renders_buildable_dockerfiles(params):
    assert problems(render_dockerfile("openmpi-rdma", params)) == []


def test_a_template_parameter_set_that_cannot_build_is_refused():
    assert problems(render_dockerfile("openmpi-rdma", {"pip_packages": ["horovod"]}))


SHIPPED = sorted((ROOT / "stacks").glob("*.yaml")) + sorted((ROOT / "tests/guides/stacks").glob("*.yaml"))


def test_every_shipped_stack_s_dockerfile_passes_the_offline_build_step_check():
    """A static check (each step installs what the next needs), not a build: tests/test_build_real.py builds."""
    built = 0
    for path in SHIPPED:
        loaded = load_stack(path)
        assert template_build_diagnostics(loaded) == [], path.name
        built += sum(1 for env in loaded.stack.environments.values() if env.build and env.build.template)
    assert built >= 3   # mpi-deepspeed, mpi-per-node, the guides' deepspeed_under_mpi


def test_the_data_names_its_sources_and_the_base_images_the_stacks_use():
    k = build_knowledge()
    for base in k.bases:
        assert base.sources and all(s.startswith("https://") for s in base.sources), base.name
    assert k.base("nvcr.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04").name == "nvidia-cuda"
    assert "torch" not in k.base("nvcr.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04").provides
    openmpi = k.base("mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04:latest")
    assert {"python3", "pip", "python-headers", "compiler", "mpi-headers"} <= openmpi.provides
    assert "torch" in k.base("nvcr.io/nvidia/pytorch:24.05-py3").provides
    assert all(p.source.startswith("https://") for p in k.pip_packages.values())


BAD_CONTEXT = CUDA + PIP + "# mpi4py against the image's MPI\n" + MPI4PY_FROM_SOURCE


def _stack(tmp_path: Path, environment: str) -> Path:
    (tmp_path / ".git").mkdir()
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        "stack: s\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, "
        "location: eastus}\nclusters:\n  gpu: {size: Standard_ND96asr_v4, max_instances: 2}\nenvironments:\n"
        f"  e:\n    {environment}\n")
    return stack


def _infra(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_validate_refuses_a_build_context_at_the_dockerfile_s_line(tmp_path):
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text(BAD_CONTEXT)
    stack = _stack(tmp_path, "build: {path: ctx}")
    run = _infra("validate", "--json", str(stack))
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    [d] = [d for d in json.loads(run.stdout)["diagnostics"] if d["rule"] == "environment.build-step"]
    assert (d["file"], d["line"], d["severity"]) == (str(tmp_path / "ctx" / "Dockerfile"), 4, "error")
    assert "build-essential" in d["hint"]
    (tmp_path / "ctx" / "Dockerfile").write_text(CUDA + PIP + BUILD_DEPS + MPI4PY_FROM_SOURCE)
    assert "environment.build-step" not in _infra("validate", "--json", str(stack)).stdout


def test_render_refuses_a_template_that_cannot_build_and_writes_nothing(tmp_path):
    stack = _stack(tmp_path, "build: {template: openmpi-rdma, parameters: {pip_packages: [horovod]}}")
    out = tmp_path / "out"
    run = _infra("render", str(stack), "--out", str(out))
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "error[environment.build-step]" in run.stderr and "pip_packages" in run.stderr
    assert f"{stack}:7:" in run.stderr   # at the environment's build:
    assert not out.exists()
    [d] = template_build_diagnostics(load_stack(stack))
    assert d.rule == "environment.build-step" and "line" in d.message and "horovod" in d.message
    stack.write_text(stack.read_text().replace("[horovod]", "[torch, horovod]"))
    assert template_build_diagnostics(load_stack(stack)) == []


def test_the_template_s_extras_are_what_validate_reads():
    meta = yaml.safe_load((ROOT / "templates/docker/openmpi-rdma/template.yaml").read_text())
    assert meta["pip_extras"]["deepspeed"] == ["mpi4py", "torch"] and "torch" in meta["pip_first"]
