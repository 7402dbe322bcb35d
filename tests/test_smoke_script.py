"""The rendered smoke scripts, run for real: torch.distributed with gloo on this CPU, under torchrun, an
Azure ML-style per-process launch, a Lightning-style per-node launch and Debian's real `mpirun`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.catalog import load_catalog
from infra_cli.smoke.judge import judge
from infra_cli.smoke.render import render_smoke_script
from infra_cli.stack.model import Distribution

# Every launcher variable a test may inherit from the machine; each launch below sets its own.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
               "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TF_CONFIG", "AZ_BATCH_MASTER_NODE", "AZ_BATCHAI_MPI_MASTER_NODE")
TIMEOUT = 180


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("smoke")
    for name in ("ddp_smoke.py", "tf_smoke.py"):
        (d / name).write_text(render_smoke_script(name, "test-stack", "ddp"))
    return d


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS and not k.startswith("OMPI_COMM_WORLD")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def smoke_args(out: Path, nodes: int, per_node: int, *extra: str) -> list[str]:
    return ["--instance-count", str(nodes), "--processes-per-instance", str(per_node), "--steps", "3",
            "--max-bytes", str(256 * 1024), "--outputs", str(out), "--timeout-s", "60", *extra]


def result_of(out: Path) -> dict:
    return json.loads((out / "smoke-result.json").read_text())


def failed_checks(result: dict) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in result["checks"] if c["ok"] is False}


def assert_passed(r: subprocess.CompletedProcess, out: Path, world: int, style: str) -> dict:
    assert r.returncode == 0, r.stdout + r.stderr
    result = result_of(out)
    assert result["passed"], failed_checks(result)
    assert result["launch"]["style"] == style
    assert result["world"]["world_size"] == world
    assert [x["rank"] for x in result["world"]["ranks"]] == list(range(world))
    bw = result["bandwidth"]
    assert bw["world_size"] == world and all(row["algbw_gbs"] > 0 for row in bw["sizes"])
    assert bw["peak_busbw_gbs"] > 0 if world > 1 else bw["peak_busbw_gbs"] == 0  # busbw: 2(n-1)/n
    for row in bw["sizes"]:  # nccl-tests' arithmetic, recomputed from what was measured
        assert row["algbw_gbs"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-9)
        assert row["busbw_gbs"] == pytest.approx(row["algbw_gbs"] * 2 * (world - 1) / world, rel=1e-9)
    assert result["ddp"]["diverged_ranks"] == [] and result["nccl"]["transport"] == "unknown"
    summary = [l for l in r.stdout.splitlines() if l.startswith("SMOKE ")]
    assert summary == [summary[0]] and summary[0].startswith("SMOKE PASS") and "busbw_peak=" in summary[0]
    return result


def torchrun(scripts: Path, n: int, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
           str(scripts / "ddp_smoke.py"), *args]
    return subprocess.run(cmd, env=env or clean_env(), capture_output=True, text=True, timeout=TIMEOUT)


def spawn_ranks(scripts: Path, envs: list[dict[str, str]], args: list[str]) -> list[subprocess.CompletedProcess]:
    """Start one process per rank with the variables a launcher would set, as Azure ML does on each node."""
    procs = [subprocess.Popen([sys.executable, str(scripts / "ddp_smoke.py"), *args], env=clean_env(**e),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for e in envs]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=TIMEOUT)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


@pytest.mark.parametrize("n", [2, 4])
def test_torchrun_standalone(scripts, tmp_path, n):
    r = torchrun(scripts, n, *smoke_args(tmp_path, 1, n))
    result = assert_passed(r, tmp_path, n, "torchrun")
    assert result["launch"]["variables"]["TORCHELASTIC_RUN_ID"]
    # The judge on a real CPU result: checks judged, bandwidth reported, InfiniBand skipped with the reason.
    d = Distribution(cluster="a100", environment="e", type="pytorch", instance_count=1, process_count_per_instance=n)
    verdict = judge(result, load_catalog().get("Standard_ND96asr_v4"), "ddp", d)
    assert verdict.passed and verdict.transport == "unknown" and verdict.peak_busbw_gbs > 0
    assert {j.name: j.outcome for j in verdict.judgements}["transport"] == "skipped"


def test_azureml_per_process_two_nodes_of_two(scripts, tmp_path):
    port = str(free_port())
    envs = [{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "4", "NODE_RANK": str(rank // 2),
             "RANK": str(rank), "LOCAL_RANK": str(rank % 2), "AZUREML_RUN_ID": "smoke_run"} for rank in range(4)]
    runs = spawn_ranks(scripts, envs, smoke_args(tmp_path, 2, 2))
    result = assert_passed(runs[0], tmp_path, 4, "azureml-per-process")
    assert all(r.returncode == 0 for r in runs)
    assert [x["node_rank"] for x in result["world"]["ranks"]] == [0, 0, 1, 1]
    assert [x["local_rank"] for x in result["world"]["ranks"]] == [0, 1, 0, 1]


def test_lightning_style_per_node_without_rank(scripts, tmp_path):
    port = str(free_port())
    envs = [{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2", "NODE_RANK": "0"},
            {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2", "NODE_RANK": "0", "LOCAL_RANK": "1"}]
    runs = spawn_ranks(scripts, envs, smoke_args(tmp_path, 1, 2))
    assert_passed(runs[0], tmp_path, 2, "per-node")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Debian's openmpi-bin (apt-get install openmpi-bin)")
def test_real_mpirun_four_ranks(scripts, tmp_path):
    port = free_port()
    env = clean_env()
    cmd = ["mpirun", "-np", "4", "--oversubscribe", "--bind-to", "none",
           "-x", f"AZ_BATCH_MASTER_NODE=127.0.0.1:{port}", "-x", "CUDA_VISIBLE_DEVICES",
           sys.executable, str(scripts / "ddp_smoke.py"), *smoke_args(tmp_path, 1, 4)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    result = assert_passed(r, tmp_path, 4, "mpi")
    found = result["launch"]["variables"]
    assert found["OMPI_COMM_WORLD_SIZE"] == "4" and found["AZ_BATCH_MASTER_NODE"] == f"127.0.0.1:{port}"
    assert result["launch"]["master_port"] == port
    assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR"} & set(found), "only the OMPI/AZ_BATCH variables were given"


def test_wrong_world_size_fails_with_reason(scripts, tmp_path):
    r = torchrun(scripts, 2, *smoke_args(tmp_path, 1, 3))
    assert r.returncode != 0
    result = result_of(tmp_path)
    assert not result["passed"]
    failed = failed_checks(result)
    assert "WORLD_SIZE 2 != instance_count 1 x process_count_per_instance 3 = 3" in failed["world_size"]
    assert "SMOKE FAIL" in r.stdout and "failed=world_size" in r.stdout


def test_missing_rank_variable_fails_with_reason(scripts, tmp_path):
    port = str(free_port())
    envs = [{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2", "LOCAL_RANK": str(i)} for i in range(2)]
    runs = spawn_ranks(scripts, envs, smoke_args(tmp_path, 1, 2))
    assert all(r.returncode == 1 for r in runs)
    result = result_of(tmp_path)
    assert not result["passed"] and result["launch"]["style"] == "unrecognised"
    assert "no rank variable" in failed_checks(result)["launch"]
    assert "SMOKE FAIL" in runs[0].stdout and "no rank variable" in runs[0].stdout


def test_bad_rank_value_fails_with_reason(scripts, tmp_path):
    r = subprocess.run([sys.executable, str(scripts / "ddp_smoke.py"), *smoke_args(tmp_path, 1, 1)],
                       env=clean_env(RANK="zero", WORLD_SIZE="1", LOCAL_RANK="0"), capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 1 and "RANK='zero' is not a whole number" in r.stdout


def test_diverged_replica_is_caught(scripts, tmp_path):
    r = torchrun(scripts, 2, *smoke_args(tmp_path, 1, 2, "--perturb-rank", "1"))
    assert r.returncode != 0
    result = result_of(tmp_path)
    assert "replicas of ranks [1] differ from rank 0" in failed_checks(result)["replicas_identical"]
    assert result["ddp"]["max_abs_diff"] == pytest.approx(1e-3, rel=0.01)


def test_single_process_without_launcher(scripts, tmp_path):
    r = subprocess.run([sys.executable, str(scripts / "ddp_smoke.py"), *smoke_args(tmp_path, 1, 1)],
                       env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert_passed(r, tmp_path, 1, "single-process")


def tf_config(workers: int, ps: int, kind: str = "worker", index: int = 0) -> str:
    cluster = {"worker": [f"10.0.0.{i}:2222" for i in range(workers)]}
    if ps:
        cluster["ps"] = [f"10.0.1.{i}:2222" for i in range(ps)]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


def run_tf(scripts: Path, out: Path, workers: int, ps: int, config: str | None) -> subprocess.CompletedProcess:
    env = clean_env(**({"TF_CONFIG": config} if config is not None else {}))
    return subprocess.run([sys.executable, str(scripts / "tf_smoke.py"), "--worker-count", str(workers),
                           "--parameter-server-count", str(ps), "--outputs", str(out)],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT)


def test_tf_config_checks_pass(scripts, tmp_path):
    r = run_tf(scripts, tmp_path, 2, 0, tf_config(2, 0))
    assert r.returncode == 0, r.stdout + r.stderr
    result = result_of(tmp_path)
    assert result["passed"] and result["task"] == {"type": "worker", "index": 0, "workers": 2, "ps": 0}
    allreduce = next(c for c in result["checks"] if c["name"] == "allreduce")
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        assert allreduce["ok"] is None and "TensorFlow is not importable" in allreduce["detail"]
    assert "SMOKE PASS" in r.stdout


@pytest.mark.parametrize("config, expected_failure", [
    (tf_config(3, 0), "3 workers in TF_CONFIG, 2 expected"),
    (tf_config(2, 1), "1 parameter servers in TF_CONFIG, 0 expected"),
    (tf_config(2, 0, index=5), "task worker 5 is outside"),
    ("{not json", "TF_CONFIG is not"),
    (None, "TF_CONFIG is not set"),
])
def test_tf_config_mismatches_fail(scripts, tmp_path, config, expected_failure):
    r = run_tf(scripts, tmp_path, 2, 0, config)
    assert r.returncode == 1
    assert r.stdout.startswith("SMOKE FAIL") and expected_failure in r.stdout
    if (tmp_path / "smoke-result.json").exists():  # worker 0 (or a task that cannot tell who it is) writes it
        assert expected_failure in " ".join(failed_checks(result_of(tmp_path)).values())
