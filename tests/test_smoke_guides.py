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

from test_smoke_frameworks import TWO_GPU_SIZE, assert_passed, need, need_mpirun, smoke
from test_smoke_script import tensorflow_or_skip

GUIDES = Path(__file__).resolve().parent / "guides" / "stacks"
NEEDS = {"horovod": ("horovod.torch",), "lightning": ("lightning",), "transformers": ("transformers", "accelerate"), "deepspeed": ("deepspeed",)}


def _runnable(path: Path) -> bool:
    return "# expect: error" not in path.read_text(encoding="utf-8")


def _shape(dist: dict) -> tuple:
    return (dist.get("type"), dist.get("framework") or "ddp", dist.get("launcher") or "per-process",
            bool(dist.get("parameter_server_count")))


def _one_per_shape() -> list[Path]:
    chosen: dict[tuple, Path] = {}
    for path in sorted(GUIDES.glob("*.yaml")):
        if not _runnable(path):
            continue
        stack = yaml.safe_load(path.read_text(encoding="utf-8"))
        for dist in (stack.get("distributions") or {}).values():
            chosen.setdefault(_shape(dist), path)
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
