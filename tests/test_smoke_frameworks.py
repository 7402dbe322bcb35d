"""Each framework's smoke job on the local emulator, for real: `infra smoke --local` submits it through the
real SDK, the emulator launches it as Azure ML would (a real mpirun over emulated hosts for MPI) and the
framework itself (Lightning, Transformers, DeepSpeed with mpi4py; Horovod where it installs) initialises
the process group and reports the world it sees, which the judge holds against the stack.

The frameworks come from the `frameworks` extra (`pip install -e '.[frameworks]'`); without it these tests
skip, unless INFRA_REQUIRE_FRAMEWORKS=1 (set by .ci/run, which installs it) makes a missing one a failure.
Shapes are 2 nodes x 2 processes (the shipped stacks' 8 GPUs per node would be 16 CPU processes here).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from system_tools import require
from test_smoke_script import tensorflow_or_skip

pytestmark = pytest.mark.runs_jobs   # jobs on the emulator: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 900
# A current 2-GPU size without InfiniBand: 2 processes per node as the size describes it.
TWO_GPU_SIZE = "Standard_NC80adis_H100_v5"


# The extra that installs a module, and the variable under which its absence fails a test instead of skipping
# it. Horovod has an extra of its own: its last release (0.28.1, 2023) is an sdist that compiles against torch
# and MPI for over 20 minutes on a 2-core machine, too long for CI, so only INFRA_REQUIRE_HOROVOD=1 demands it.
EXTRAS = {"horovod": ("horovod", "INFRA_REQUIRE_HOROVOD")}


def need(*modules: str) -> None:
    for module in modules:
        extra, required = EXTRAS.get(module.split(".")[0], ("frameworks", "INFRA_REQUIRE_FRAMEWORKS"))
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if os.environ.get(required) == "1":
                pytest.fail(f"{module} must be installed here ({required}=1): {exc}")
            pytest.skip(f"{module} is not installed (pip install -e '.[{extra}]'): {exc}")


def need_mpirun() -> None:
    require("mpirun")


def write_stack(path: Path, name: str, clusters: dict, distributions: dict, environments: dict | None = None) -> Path:
    stack = {"stack": name,
             "workspace": {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "rg-test",
                           "name": "mlw-test", "location": "eastus"},
             "clusters": clusters,
             "environments": environments or {"acpt": {"curated": "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}},
             "distributions": distributions}
    path.write_text(yaml.safe_dump(stack, sort_keys=False))
    return path


def infra(*args: str, state: Path, user: int | None = None) -> subprocess.CompletedProcess:
    """The CLI in a subprocess; with `user`, as that uid (a normal user: never root), able to read this
    checkout and the interpreter wherever they live but to write only what that user owns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
    env.update({"INFRA_LOCAL_DIR": str(state / "local"), "PYTHONPATH": str(ROOT)})
    prefix: list[str] = []
    if user is not None:
        env["HOME"] = str(state)
        prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups",
                  "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    return subprocess.run([*prefix, sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True,
                          env=env, cwd=state, timeout=TIMEOUT)


def smoke(stack: Path, state: Path, user: int | None = None) -> dict[str, dict]:
    """apply (no smoke), then `infra smoke --json`: the verdicts by distribution."""
    applied = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state, user=user)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    r = infra("smoke", str(stack), "--local", "--json", state=state, user=user)
    assert "Traceback" not in r.stderr, r.stderr
    verdicts = {v["distribution"]: v for v in json.loads(r.stdout)}
    assert r.returncode == (0 if all(v["passed"] for v in verdicts.values()) else 1)
    return verdicts


def judged(verdict: dict) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for j in verdict["judgements"]:
        out.setdefault(j["name"], []).append((j["outcome"], j["detail"]))
    return out


def assert_passed(verdict: dict) -> dict[str, list[tuple[str, str]]]:
    got = judged(verdict)
    failed = {name: items for name, items in got.items() if any(o == "fail" for o, _ in items)}
    assert verdict["passed"] and not failed, json.dumps(verdict, indent=1)[:6000]
    return got


def test_deepspeed_under_mpi_discovers_its_world_as_on_azure_ml(tmp_path):
    """stacks/mpi-deepspeed.yaml at 2 nodes x 2 processes, as root (Azure ML runs jobs as root): Azure ML's
    mpirun over two emulated hosts, mpi4py's MPI world, and deepspeed.init_distributed's own MPI discovery."""
    need("deepspeed", "mpi4py")
    need_mpirun()
    stack = yaml.safe_load((ROOT / "stacks" / "mpi-deepspeed.yaml").read_text())
    stack["distributions"]["deepspeed"]["process_count_per_instance"] = 2
    path = tmp_path / "mpi-deepspeed.yaml"
    path.write_text(yaml.safe_dump(stack, sort_keys=False))
    got = assert_passed(smoke(path, tmp_path)["deepspeed"])
    assert got["framework"] == [("pass", got["framework"][0][1])]
    assert "deepspeed" in got["framework"][0][1] and "sees world size 4 = 2 nodes x 2 processes" in got["framework"][0][1]
    assert got["check.mpi4py_world"][0][0] == "pass" and "rank 0 of 4" in got["check.mpi4py_world"][0][1]
    # Local ranks per node, as Open MPI numbered them on each emulated host (not 0..3 across the job).
    assert all(o == "pass" for o, _ in got["check.framework_local_rank"])
    assert "launch: rank 0 of 4" in got["check.launch"][0][1] or "mpi launch" in got["check.launch"][0][1]


def test_mpi_per_node_launch_as_a_normal_user(tmp_path):
    """The guides' MPI per-node launch: one process per node from Azure ML's mpirun, torchrun inside with
    OMPI_COMM_WORLD_RANK as the node rank and AZ_BATCH_MASTER_NODE as the rendezvous; run by a normal user
    (uid 65534), so mpirun runs without root and the emulator's files are that user's."""
    need_mpirun()
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("switching to a normal user needs root and setpriv")
    stack = yaml.safe_load((ROOT / "stacks" / "mpi-per-node.yaml").read_text())
    stack["clusters"]["a100-per-node"]["size"] = TWO_GPU_SIZE
    stack["clusters"]["a100-per-node"]["infiniband"] = "optional"     # no InfiniBand on the 2-GPU size: sockets accepted
    # The user's own directory, outside pytest's (which only root may enter).
    home = Path(tempfile.mkdtemp(prefix="infra-normal-user-"))
    try:
        path = write_stack(home / "mpi-per-node.yaml", "mpi-per-node", stack["clusters"], stack["distributions"],
                           stack["environments"])
        os.chown(home, 65534, 65534)
        os.chown(path, 65534, 65534)
        verdict = smoke(path, home, user=65534)["per-node"]
        got = assert_passed(verdict)
        assert "torchrun launch: rank 0 of 4" in got["check.launch"][0][1]
        assert "node ranks [0, 1]" in got["check.one_host_per_node_rank"][0][1]
        files = [p for p in (home / "local").rglob("*") if p.is_file()]
        assert files and all(p.stat().st_uid == 65534 for p in files), "everything the emulator wrote is the user's"
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_lightning_and_transformers_see_the_stacks_world(tmp_path):
    """Lightning's Trainer (per-process under Azure ML's launch, and per-node under torchrun) and
    Transformers' TrainingArguments, each 2 nodes x 2 processes: what each framework reports is judged."""
    need("lightning", "transformers", "accelerate")
    clusters = {"gpu2": {"size": TWO_GPU_SIZE, "max_instances": 2, "infiniband": "optional"}}
    common = {"cluster": "gpu2", "environment": "acpt", "type": "pytorch", "instance_count": 2}
    path = write_stack(tmp_path / "frameworks.yaml", "frameworks", clusters, {
        "lightning-per-process": {**common, "framework": "lightning", "launcher": "per-process",
                                  "process_count_per_instance": 2},
        "lightning-per-node": {**common, "framework": "lightning", "launcher": "per-node"},
        "transformers": {**common, "framework": "transformers", "process_count_per_instance": 2},
    })
    verdicts = smoke(path, tmp_path)
    for name, launch in (("lightning-per-process", "azureml-per-process"), ("lightning-per-node", "torchrun"),
                         ("transformers", "azureml-per-process")):
        got = assert_passed(verdicts[name])
        framework = name.split("-")[0]
        assert got["framework"][0][0] == "pass" and f"{framework} " in got["framework"][0][1], name
        assert "sees world size 4 = 2 nodes x 2 processes" in got["framework"][0][1], name
        assert got["check.launch"][0][1].startswith(f"{launch} launch"), (name, got["check.launch"])
    lightning = judged(verdicts["lightning-per-process"])
    assert "lightning sees 2 nodes == the stack's 2" in lightning["check.framework_num_nodes"][0][1]


def test_tensorflow_with_a_parameter_server(tmp_path):
    """A tensorflow distribution with a parameter server: TF_CONFIG as Azure ML writes it, resolved by
    TensorFlow's own TFConfigClusterResolver in every task."""
    tensorflow_or_skip()
    clusters = {"v100": {"size": "Standard_ND40rs_v2", "max_instances": 2}}
    path = write_stack(tmp_path / "tf-ps.yaml", "tf-ps", clusters, {
        "ps": {"cluster": "v100", "environment": "tf", "type": "tensorflow", "framework": "tensorflow",
               "instance_count": 2, "worker_count": 2, "parameter_server_count": 1}},
        environments={"tf": {"curated": "azureml:AzureML-tensorflow-2.12-cuda11@latest"}})
    got = assert_passed(smoke(path, tmp_path)["ps"])
    assert "TFConfigClusterResolver sees task worker 0 of 2 worker(s) and 1 parameter server(s)" in \
        got["check.cluster_resolver"][0][1]
    assert got["check.parameter_server_count"][0][0] == "pass"


HOROVOD_STACK = {"cluster": "a100", "environment": "hvd", "type": "mpi", "framework": "horovod",
                 "instance_count": 2, "process_count_per_instance": 8}


def test_horovod_smoke_job_renders_and_loads_with_azure_ai_ml(tmp_path):
    """Horovod runs under Azure ML's MPI distribution: the rendered job is one `az ml job create` accepts."""
    from azure.ai.ml import MpiDistribution, load_job

    path = write_stack(tmp_path / "horovod.yaml", "horovod", {"a100": {"size": "Standard_ND96asr_v4", "max_instances": 2}},
                       {"hvd": HOROVOD_STACK},
                       environments={"hvd": {"image": "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04",
                                             "requires": ["openmpi>=4.1", "horovod"]}})
    out = tmp_path / "render"
    r = subprocess.run([sys.executable, "-m", "infra_cli", "render", str(path), "--out", str(out)], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    job = load_job(out / "jobs" / "hvd" / "smoke-job.yml")
    assert isinstance(job.distribution, MpiDistribution) and job.distribution.process_count_per_instance == 8
    assert job.resources.instance_count == 2
    assert "--framework horovod" in job.command and "ddp_smoke.py" in job.command
    assert (out / "jobs" / "hvd" / "ddp_smoke.py").is_file()


def test_horovod_runs_when_it_installs(tmp_path):
    need("horovod.torch")
    need_mpirun()
    path = write_stack(tmp_path / "horovod.yaml", "horovod", {"a100": {"size": "Standard_ND96asr_v4", "max_instances": 2}},
                       {"hvd": {**HOROVOD_STACK, "process_count_per_instance": 2}},
                       environments={"hvd": {"image": "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04"}})
    got = assert_passed(smoke(path, tmp_path)["hvd"])
    assert "horovod" in got["framework"][0][1] and "sees world size 4" in got["framework"][0][1]
