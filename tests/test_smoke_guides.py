"""`infra smoke --local` passes for the guides' setups that Azure ML can run (tests/guides/stacks/, those
`infra validate` accepts), one per launch shape (distribution type, framework, launcher, parameter servers):
the emulator launches each as Azure ML would and the framework in it sees the stack's world.

Shapes are shrunk to what this machine runs: at most 2 nodes, 2 processes per node, on a 2-GPU size (a
per-node launcher starts one process per GPU), InfiniBand optional (the emulator's CPU run judges none).
Frameworks missing here skip as in test_smoke_frameworks.py (fail under INFRA_REQUIRE_FRAMEWORKS=1, Horovod
under INFRA_REQUIRE_HOROVOD=1).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from test_shipped_stacks import STACKS, _framework, _protected
from test_smoke_frameworks import TWO_GPU_SIZE, assert_passed, need, need_mpirun, smoke
from test_smoke_script import tensorflow_or_skip

pytestmark = pytest.mark.runs_jobs   # jobs on the emulator: scheduled first (tests/conftest.py)

GUIDES = Path(__file__).resolve().parent / "guides" / "stacks"
NEEDS = {"horovod": ("horovod.torch",), "lightning": ("lightning",), "transformers": ("transformers", "accelerate"), "deepspeed": ("deepspeed",)}


def _runnable(path: Path) -> bool:
    return "# expect: error" not in path.read_text(encoding="utf-8")


def _shape(dist: dict) -> tuple:
    # A tensorflow distribution's job runs TensorFlow's own smoke script whatever framework the stack names
    # (infra_cli/smoke/spec.py): its framework is no part of its launch shape.
    framework = "tensorflow" if dist.get("type") == "tensorflow" else dist.get("framework") or "ddp"
    return (dist.get("type"), framework, dist.get("launcher") or "per-process", bool(dist.get("parameter_server_count")))


# Launch shapes another test already smokes on the emulator, saying more of what the framework saw: a guide's
# setup of that shape, shrunk to this machine, would run the same job again (each shape's job runs once a suite).
# So are the shapes of the shipped stacks the walk smokes to PASSED (_smoked_by_shipped_stacks).
SMOKED_ELSEWHERE = {
    ("tensorflow", "tensorflow", "per-process", False):
        ("test_smoke_cli", "test_infra_smoke_local_tensorflow_multiworker"),
    ("tensorflow", "tensorflow", "per-process", True):
        ("test_smoke_frameworks", "test_tensorflow_with_a_parameter_server"),
    ("mpi", "deepspeed", "per-process", False):
        ("test_smoke_frameworks", "test_deepspeed_under_mpi_discovers_its_world_as_on_azure_ml"),
    ("pytorch", "lightning", "per-process", False):
        ("test_smoke_frameworks", "test_lightning_and_transformers_see_the_stacks_world"),
}


def _smoked_by_shipped_stacks() -> set[tuple]:
    """The shapes of the shipped stacks whose smoke passes in tests/test_shipped_stacks.py's walk (the ones it
    applies with their smoke, whose framework the quick start has): the walk runs them at their full size."""
    return {_shape(dist) for stack in STACKS if not _protected(stack) and not _framework(stack)
            for dist in (yaml.safe_load(stack.read_text()).get("distributions") or {}).values()}


def _guides_by_shape() -> dict[tuple, Path]:
    chosen: dict[tuple, Path] = {}
    for path in sorted(GUIDES.glob("*.yaml")):
        if not _runnable(path):
            continue
        stack = yaml.safe_load(path.read_text(encoding="utf-8"))
        for dist in (stack.get("distributions") or {}).values():
            chosen.setdefault(_shape(dist), path)
    return chosen


def _one_per_shape() -> list[Path]:
    elsewhere = set(SMOKED_ELSEWHERE) | _smoked_by_shipped_stacks()
    chosen = {shape: path for shape, path in _guides_by_shape().items() if shape not in elsewhere}
    return sorted(set(chosen.values()))


def shrunk(stack: dict) -> dict:
    for cluster in stack["clusters"].values():
        cluster.update({"size": TWO_GPU_SIZE, "infiniband": "optional",
                        "max_instances": min(int(cluster.get("max_instances") or 2), 2)})
    for dist in stack["distributions"].values():
        dist["instance_count"] = min(int(dist.get("instance_count") or 1), 2)
        if dist.get("process_count_per_instance"):
            dist["process_count_per_instance"] = min(int(dist["process_count_per_instance"]), 2)
        if dist.get("type") == "tensorflow":
            dist["worker_count"] = min(int(dist.get("worker_count") or dist["instance_count"]), 2)
        dist.pop("command", None)       # the smoke runs its own script; the user's code is not here
        dist.pop("code", None)
    return stack


@pytest.mark.parametrize("guide", _one_per_shape(), ids=lambda p: p.stem)
def test_guide_setup_passes_its_smoke_on_the_emulator(guide, tmp_path):
    stack = shrunk(yaml.safe_load(guide.read_text(encoding="utf-8")))
    kinds = {d.get("type") for d in stack["distributions"].values()}
    frameworks = {d.get("framework") for d in stack["distributions"].values()}
    if "tensorflow" in kinds:
        tensorflow_or_skip()
    if "mpi" in kinds:
        need_mpirun()
    for framework in frameworks:
        need(*NEEDS.get(framework, ()))
    if "mpi" in kinds and "deepspeed" in frameworks:
        need("mpi4py")
    path = tmp_path / guide.name
    path.write_text(yaml.safe_dump(stack, sort_keys=False))
    if (GUIDES / "contexts").is_dir():  # build contexts the guides' stacks name, relative to the stack file
        shutil.copytree(GUIDES / "contexts", tmp_path / "contexts")
    verdicts = smoke(path, tmp_path)
    assert set(verdicts) == set(stack["distributions"])
    for verdict in verdicts.values():
        assert_passed(verdict)


def test_every_shape_the_guides_show_is_smoked_here_or_by_the_test_named():
    """A shape left out here is one the guides show, and the test named for it exists and names it."""
    import importlib
    import inspect
    shown = _guides_by_shape()
    for shape, (module, name) in SMOKED_ELSEWHERE.items():
        assert shape in shown, f"no guide shows {shape}: drop it from SMOKED_ELSEWHERE"
        source = inspect.getsource(getattr(importlib.import_module(module), name))
        _, framework, _, ps = shape
        assert framework in source and (not ps or "parameter_server_count" in source), (shape, name)
    shipped = _smoked_by_shipped_stacks()
    assert shipped >= {("pytorch", "ddp", "per-process", False), ("mpi", "ddp", "per-node", False)}, shipped
    assert {_shape(d) for p in _one_per_shape() for d in yaml.safe_load(p.read_text())["distributions"].values()} \
        | set(SMOKED_ELSEWHERE) | shipped >= set(shown)
