"""Attacks on the Dockerfile step reader and the build-steps check (validate/dockerfile.py run_commands and
pip_install, validate/build_steps.py), each one that found a defect kept here.

- pip's option values were read as packages: `pip install -r requirements.txt --no-binary mpi4py --target out
  torch` said it installs requirements.txt, mpi4py and out (the environment looked as if it carried mpi4py).
- A separator glued to its words (`python3-pip&&pip install torch`) hid the second command.
- The openmpi-rdma template's HPC-X step ran wget (and tar xj) on the CUDA base, which has neither: found by
  the check itself (tests/test_build_steps.py renders that parameter set).
"""

from __future__ import annotations

import pytest

from infra_cli.image.dockerfile import render_dockerfile
from infra_cli.validate.build_steps import build_step_problems
from infra_cli.validate.dockerfile import read_dockerfile, run_commands

CUDA = "FROM nvcr.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04\n"


@pytest.mark.parametrize("run, specs", [
    ("pip install -r requirements.txt --no-binary mpi4py --target out torch", ("torch",)),
    ("pip install --index-url https://x/simple -c constraints.txt --only-binary=:all: numpy", ("numpy",)),
    ("python3 -m pip install -e . --config-settings editable_mode=strict deepspeed", ("deepspeed",)),
    ("pip install ./wheel.whl git+https://github.com/x/y.git torch", ("torch",)),
])
def test_pip_option_values_are_not_packages(run, specs):
    assert read_dockerfile(f"FROM x\nRUN {run}\n").pip_installs == specs


def test_glued_separators_split_commands():
    words = [c.words for c in run_commands("apt-get install -y python3-pip&&pip install torch;echo done")]
    assert words == [("apt-get", "install", "-y", "python3-pip"), ("pip", "install", "torch"), ("echo", "done")]
    # a quoted script keeps its separators for `sh -c` to read
    assert [c.words for c in run_commands("sh -c 'pip install torch && pip install deepspeed'")] == [
        ("pip", "install", "torch"), ("pip", "install", "deepspeed")]
    assert build_step_problems(CUDA + "RUN apt-get update&&apt-get install -y python3-pip&&pip install deepspeed\n")


def test_nested_shells_are_read_to_a_bound():
    script = "pip install torch"
    for _ in range(50):
        script = "sh -c " + repr(script).replace("\\'", "'")
    run_commands(script)   # reads 4 deep, then stops: no recursion error
    assert build_step_problems(CUDA + "RUN " + script + "\n") == []


def test_a_long_run_line_is_judged_once_per_command():
    text = CUDA + "RUN " + " && ".join(["pip install torch"] * 1000) + "\n"
    [problem] = build_step_problems(text)[:1]
    assert problem.line == 2 and len(build_step_problems(text)) == 1000


def test_hostile_words_reach_messages_shortened():
    text = CUDA + "RUN pip install " + "x" * 100_000 + "\n"
    [p] = build_step_problems(text)
    assert len(p.message) < 1000 and p.step.endswith("...")


def test_the_hpcx_step_installs_what_it_runs():
    text = render_dockerfile("openmpi-rdma", {"hpcx_url": "https://example.com/hpcx.tbz"})
    hpcx = text[text.index("# NVIDIA HPC-X"):]
    assert hpcx.index("wget bzip2") < hpcx.index("wget -qO-")
    assert build_step_problems(text) == []
