"""Jobs really run on this machine as Azure ML runs them, submitted and observed through the real SDK:
PyTorch (torch.distributed gloo all_reduce), MPI (a real mpirun), TensorFlow (TF_CONFIG), failures,
cancellation; logs through jobs.stream and outputs through jobs.download."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

import pytest
from azure.ai.ml import MpiDistribution, PyTorchDistribution, TensorFlowDistribution, command
from azure.ai.ml.entities import AmlCompute, Environment
from azure.ai.ml.exceptions import JobException

from emulator_fixtures import start_emulator
from infra_cli.emulator.launch import JobSpec, mpi_session_base, plan_launches

IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest"

ALL_REDUCE = """
import json, os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank} of {world}: all_reduce sum {t.item()}", flush=True)
os.makedirs("outputs", exist_ok=True)
keys = ("RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
json.dump({"sum": t.item(), **{k: os.environ[k] for k in keys}}, open(f"outputs/rank_{rank}.json", "w"))
dist.destroy_process_group()
"""

DUMP_ENV = """
import json, os
rank = os.environ.get("OMPI_COMM_WORLD_RANK") or json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index")
os.makedirs("outputs", exist_ok=True)
json.dump({**os.environ, "CWD": os.getcwd()}, open(f"outputs/env_{rank}.json", "w"))
print("done", rank)
"""


@pytest.fixture
def ready(clients, tmp_path):
    clients.ml.compute.begin_create_or_update(AmlCompute(name="cpu", size="Standard_ND96asr_v4", max_instances=2)).result()
    clients.ml.environments.create_or_update(Environment(name="runtime", version="1", image=IMAGE))
    return clients


def _code(tmp_path: Path, name: str, text: str) -> Path:
    src = tmp_path / f"src-{name}"
    src.mkdir()
    (src / name).write_text(text)
    return src


def _stream(clients, name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        clients.ml.jobs.stream(name)
    return out.getvalue()


def _download(clients, name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"download-{name}"
    clients.ml.jobs.download(name, download_path=str(target), all=True)
    return target / "artifacts"


def test_pytorch_gloo_all_reduce_job_completes_and_output_comes_back(ready, tmp_path):
    job = command(code=str(_code(tmp_path, "train.py", ALL_REDUCE)), command="python train.py",
                  environment="runtime:1", compute="cpu", instance_count=2,
                  distribution=PyTorchDistribution(process_count_per_instance=1))
    submitted = ready.ml.jobs.create_or_update(job)
    log = _stream(ready, submitted.name)
    assert "rank 0 of 2: all_reduce sum 3.0" in log
    assert ready.ml.jobs.get(submitted.name).status == "Completed"
    artifacts = _download(ready, submitted.name, tmp_path)
    ranks = [json.loads((artifacts / "outputs" / f"rank_{r}.json").read_text()) for r in (0, 1)]
    assert [r["sum"] for r in ranks] == [3.0, 3.0]
    assert [(r["RANK"], r["NODE_RANK"], r["LOCAL_RANK"], r["WORLD_SIZE"]) for r in ranks] == [
        ("0", "0", "0", "2"), ("1", "1", "0", "2")]
    assert ranks[0]["MASTER_ADDR"] == "127.0.0.1" and ranks[0]["MASTER_PORT"] == ranks[1]["MASTER_PORT"]
    assert "rank 1 of 2" in (artifacts / "user_logs" / "std_log_process_1.txt").read_text()


@pytest.mark.system_tools("mpirun")
def test_mpi_job_runs_under_a_real_mpirun(ready, tmp_path):
    job = command(code=str(_code(tmp_path, "env.py", DUMP_ENV)), command="python env.py", environment="runtime:1",
                  compute="cpu", instance_count=2, distribution=MpiDistribution(process_count_per_instance=2))
    submitted = ready.ml.jobs.create_or_update(job)
    _stream(ready, submitted.name)
    assert ready.ml.jobs.get(submitted.name).status == "Completed"
    artifacts = _download(ready, submitted.name, tmp_path)
    envs = [json.loads((artifacts / "outputs" / f"env_{r}.json").read_text()) for r in range(4)]
    assert [e["OMPI_COMM_WORLD_SIZE"] for e in envs] == ["4"] * 4
    assert all("PMIX_RANK" in e for e in envs), "ranks must have been started by mpirun"
    # Open MPI saw two hosts of two slots: it numbers local ranks per node itself.
    assert [e["OMPI_COMM_WORLD_LOCAL_RANK"] for e in envs] == ["0", "1", "0", "1"]
    assert [e["OMPI_COMM_WORLD_LOCAL_SIZE"] for e in envs] == ["2"] * 4
    # Open MPI's NODE_RANK: the rank among the node's processes, NOT the node's index (the guides warn of it).
    assert [e["OMPI_COMM_WORLD_NODE_RANK"] for e in envs] == ["0", "1", "0", "1"]
    assert [e["AZUREML_NODE_HOSTNAME"] for e in envs] == ["cpu-node-0", "cpu-node-0", "cpu-node-1", "cpu-node-1"]
    assert [Path(e["CWD"]).name for e in envs] == ["node-0", "node-0", "node-1", "node-1"]
    # Azure ML sets no NODE_RANK (nor MASTER_ADDR/PORT) on MPI jobs; the master is AZ_BATCH_MASTER_NODE.
    assert not any("NODE_RANK" in e or "MASTER_PORT" in e for e in envs)
    host, _, port = envs[0]["AZ_BATCH_MASTER_NODE"].partition(":")
    assert host == "127.0.0.1" and port.isdigit() and {e["AZ_BATCH_MASTER_NODE"] for e in envs} == {f"{host}:{port}"}
    assert "AZUREML_CURRENT_CLOUD" not in envs[0]
    # Every rank sees the job's PATH as other launchers do, the emulator's python first: not Open MPI's folder
    # put in front of it (mpirun's --prefix behaviour), which ran /usr/bin's tools instead of the job's.
    paths = {e["PATH"] for e in envs}
    assert len(paths) == 1, paths
    first = Path(paths.pop().split(os.pathsep)[0])
    assert (first / "python").read_text() == f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', first


def test_tensorflow_job_gets_tf_config(ready, tmp_path):
    job = command(code=str(_code(tmp_path, "env.py", DUMP_ENV)), command="python env.py", environment="runtime:1",
                  compute="cpu", instance_count=2, distribution=TensorFlowDistribution(worker_count=2))
    submitted = ready.ml.jobs.create_or_update(job)
    _stream(ready, submitted.name)
    artifacts = _download(ready, submitted.name, tmp_path)
    configs = [json.loads(json.loads((artifacts / "outputs" / f"env_{i}.json").read_text())["TF_CONFIG"]) for i in (0, 1)]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert len(configs[0]["cluster"]["worker"]) == 2


def test_failing_job_is_failed_with_its_error(ready, tmp_path):
    job = command(code=str(_code(tmp_path, "boom.py", "import sys\nprint('about to fail')\nsys.exit(3)\n")),
                  command="python boom.py", environment="runtime:1", compute="cpu")
    submitted = ready.ml.jobs.create_or_update(job)
    with pytest.raises(JobException) as info:
        _stream(ready, submitted.name)
    assert "exited with code 3" in str(info.value)
    assert ready.ml.jobs.get(submitted.name).status == "Failed"


def _running_sleeper(clients, tmp_path: Path, seconds: int) -> str:
    """A submitted job that sleeps `seconds`, once the emulator says it runs."""
    job = command(code=str(_code(tmp_path, "sleep.py", f"import time\nprint('sleeping', flush=True)\ntime.sleep({seconds})\n")),
                  command="python sleep.py", environment="runtime:1", compute="cpu")
    name = clients.ml.jobs.create_or_update(job).name
    deadline = time.time() + 30
    while clients.ml.jobs.get(name).status != "Running" and time.time() < deadline:
        time.sleep(0.1)
    return name


def test_cancel_stops_a_running_job(ready, tmp_path):
    name = _running_sleeper(ready, tmp_path, 120)
    ready.ml.jobs.begin_cancel(name).result()
    assert ready.ml.jobs.get(name).status == "Canceled"


def test_a_cancel_accepted_while_the_job_starts_is_not_undone(ready, emulator, tmp_path):
    """CI once saw a job read `Starting` right after its cancel was answered: the runner's thread wrote its
    next step over CancelRequested. The race is laid out step by step on a job no thread runs: the cancel is
    accepted, then the runner writes the steps it would have written had it been a moment slower."""
    import copy

    from infra_cli.emulator.service import Scope

    name = _running_sleeper(ready, tmp_path, 1)
    store, runner = emulator.backend.store, emulator.backend.runner
    [row] = [r for r in store.rows("job") if r.name == name.lower()]
    body = copy.deepcopy(row.body)
    body["name"], body["properties"]["status"] = "starting-job", "Starting"
    store.put("job", row.scope, "starting-job", body)
    scope = Scope(*row.scope.split("/"))

    ready.ml.jobs.begin_cancel("starting-job")
    assert ready.ml.jobs.get("starting-job").status == "CancelRequested"
    for late_step in ("Starting", "Running", "Finalizing"):
        runner._set_status(scope, "starting-job", late_step)
        assert ready.ml.jobs.get("starting-job").status == "CancelRequested", late_step
    runner._set_status(scope, "starting-job", "Canceled")
    runner._set_status(scope, "starting-job", "Running")     # and an ended job stays ended
    assert ready.ml.jobs.get("starting-job").status == "Canceled"


def test_job_on_missing_compute_is_refused(ready, tmp_path):
    from azure.core.exceptions import HttpResponseError

    job = command(command="echo hi", environment="runtime:1", compute="nope")
    with pytest.raises(HttpResponseError) as info:
        ready.ml.jobs.create_or_update(job)
    assert "Compute 'nope' does not exist" in str(info.value)


def test_pytorch_launch_plan_gives_each_process_its_ranks(tmp_path):
    spec = JobSpec(name="j", command="python t.py ${{inputs.lr}}", instance_count=2,
                   distribution={"distributionType": "PyTorch", "processCountPerInstance": 2},
                   inputs={"lr": {"jobInputType": "literal", "value": "0.1"}})
    launches = plan_launches(spec, tmp_path, tmp_path / "logs")
    assert [(l.env["RANK"], l.env["LOCAL_RANK"], l.env["NODE_RANK"]) for l in launches] == [
        ("0", "0", "0"), ("1", "1", "0"), ("2", "0", "1"), ("3", "1", "1")]
    assert {l.env["WORLD_SIZE"] for l in launches} == {"4"}
    assert launches[2].cwd == tmp_path / "node-1"
    assert launches[0].argv[-1] == "python t.py 0.1"
    assert [l.log for l in launches][:2] == ["user_logs/std_log_process_0.txt", "user_logs/std_log_process_1.txt"]


def test_another_emulator_over_the_same_state_leaves_running_jobs_alone(ready, emulator, tmp_path):
    """Every `--local` command starts its own emulator over ./.infra/local: one started while another's job
    runs must not fail that job; only jobs whose runner process is gone (or whose pid now names another
    process) are failed."""
    import copy
    import subprocess

    from infra_cli.emulator.runner import process_start_time, runner_identity

    name = _running_sleeper(ready, tmp_path, 10)
    store = emulator.backend.store
    [row] = [r for r in store.rows("job") if r.name == name.lower()]
    # Two orphans: a runner that has exited, and a live pid whose start time says it is another process.
    gone = subprocess.Popen(["sleep", "30"])
    identity = {"pid": gone.pid, "start": process_start_time(gone.pid)}
    gone.kill()
    gone.wait()
    for orphan, runner in (("orphan-exited", identity), ("orphan-reused-pid", {**runner_identity(), "start": "1"})):
        body = copy.deepcopy(row.body)
        body["name"], body["_private"]["runner"] = orphan, runner
        store.put("job", row.scope, orphan, body)

    second = start_emulator(tmp_path / "local")     # what a second `infra plan --local` does
    try:
        assert ready.ml.jobs.get(name).status == "Running"
        _stream(ready, name)
        assert ready.ml.jobs.get(name).status == "Completed"
        for orphan in ("orphan-exited", "orphan-reused-pid"):
            body = store.get("job", row.scope, orphan)
            assert body["properties"]["status"] == "Failed", orphan
            assert "The emulator stopped while this job ran" in body["_private"]["error"]["message"]
    finally:
        second.stop()


def test_master_port_is_azure_mls_6105_unless_another_job_holds_it():
    from infra_cli.emulator.launch import AZUREML_MASTER_PORT
    from infra_cli.emulator.runner import MasterPortLease

    spec = JobSpec(name="j", command="true", instance_count=2,
                   distribution={"distributionType": "PyTorch", "processCountPerInstance": 1})
    assert {l.env["MASTER_PORT"] for l in plan_launches(spec, Path("/w"), Path("/l"))} == {"6105"}
    first = MasterPortLease()
    try:
        second = MasterPortLease()     # a concurrent job on this machine: never the port the first one holds
        try:
            assert second.port != AZUREML_MASTER_PORT   # whoever holds 6105 (the first, or another job here)
        finally:
            second.release()
    finally:
        first.release()


def test_launch_variables_are_only_those_azure_ml_sets(tmp_path):
    per_process = JobSpec(name="j", command="true", instance_count=2,
                          distribution={"distributionType": "PyTorch", "processCountPerInstance": 2})
    for launch in plan_launches(per_process, tmp_path, tmp_path / "logs"):
        assert not {"GROUP_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"} & set(launch.env), launch.env
    mpi = JobSpec(name="j", command="true", instance_count=2, distribution={"distributionType": "Mpi",
                                                                            "processCountPerInstance": 2})
    ranks = plan_launches(mpi, tmp_path, tmp_path / "logs", mpirun=None)   # without Open MPI: its variables
    assert [l.env["OMPI_COMM_WORLD_LOCAL_RANK"] for l in ranks] == ["0", "1", "0", "1"]
    assert [l.env["OMPI_COMM_WORLD_NODE_RANK"] for l in ranks] == ["0", "1", "0", "1"], "Open MPI's meaning"
    assert not any("NODE_RANK" in l.env or "MASTER_PORT" in l.env for l in ranks)
    single = JobSpec(name="j", command="true", instance_count=1, distribution={"distributionType": "Mpi"})
    [only] = plan_launches(single, tmp_path, tmp_path / "logs", mpirun=None)
    assert only.env["AZ_BATCHAI_MPI_MASTER_NODE"] == "127.0.0.1" and "AZ_BATCH_MASTER_NODE" not in only.env
    [mpirun] = plan_launches(mpi, tmp_path, tmp_path / "logs", mpirun="/usr/bin/mpirun")
    assert "--allow-run-as-root" in mpirun.argv
    hostfile = dict((str(p), text) for p, text, _ in mpirun.files)[str(tmp_path / "mpi" / "hostfile")]
    assert hostfile == "local-node-0 slots=2\nlocal-node-1 slots=2\n"


def test_each_emulated_mpi_node_keeps_its_open_mpi_session_directory_apart(tmp_path):
    """Open MPI 4.1's daemons on one machine all create /tmp/ompi.HOST.UID/jf.N at once, and one that loses the
    mkdir race fails the job ("orte_session_dir failed", seen on mpi-deepspeed's smoke): each emulated node's
    daemon gets a session directory of its own, short enough for the unix sockets Open MPI puts in it, and the
    runner removes it after the job."""
    spec = JobSpec(name="j", command="true", instance_count=3,
                   distribution={"distributionType": "Mpi", "processCountPerInstance": 2}, compute="gpu")
    [launch] = plan_launches(spec, tmp_path / "job", tmp_path / "logs", mpirun="/usr/bin/mpirun")
    base = mpi_session_base(tmp_path / "job")
    agent = next(text for path, text, _ in launch.files if path.name == "node-agent.sh")
    assert f'OMPI_MCA_orte_tmpdir_base={base}/node-"$node"' in agent
    # mpirun --noprefix (the ranks keep the job's PATH): the daemon is run from mpirun's own folder
    assert "--noprefix" in launch.argv and 'daemon=/usr/bin/"$daemon"' in agent
    assert launch.scratch == (base,) and len(str(base)) < 48
    assert mpi_session_base(tmp_path / "other") != base
