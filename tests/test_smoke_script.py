"""The rendered smoke scripts, run for real: torch.distributed with gloo on this CPU, under torchrun, an
Azure ML-style per-process launch, a Lightning-style per-node launch and Debian's real `mpirun`."""

from __future__ import annotations

import json
import os
import socket
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.knowledge.skus import load_catalog
from infra_cli.smoke.judge import judge
from infra_cli.smoke.job_templates import render_smoke_script
from infra_cli.stack.model import Distribution

pytestmark = pytest.mark.runs_jobs   # jobs on the emulator: scheduled first (tests/conftest.py)

# Every launcher variable a test may inherit from the machine; each launch below sets its own.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
               "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TF_CONFIG", "AZ_BATCH_MASTER_NODE", "AZ_BATCHAI_MPI_MASTER_NODE",
               "INFRA_EMULATED_NODE")
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
    assert result["ddp"]["diverged_ranks"] == [] and result["nccl"]["transport"] == "gloo-tcp"
    summary = [l for l in r.stdout.splitlines() if l.startswith("SMOKE ")]
    assert summary == [summary[0]] and summary[0].startswith("SMOKE PASS")
    # one rank: busbw is 0 by its formula, shown as not applicable rather than as a broken network
    assert ("busbw_peak=" if world > 1 else "busbw=n/a(one-rank)") in summary[0], summary[0]
    assert "transport=gloo-tcp" in summary[0].split(), summary[0]  # gloo moves data over TCP: named, not "unknown"
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
    a100 = load_catalog().get("Standard_ND96asr_v4")
    # On a real ND96asr_v4 node a CPU run means the image cannot use the GPUs: caught, not passed.
    assert result["node"] == {"gpu_device_files": [], "emulated": False}
    cpu_on_gpu_size = judge(result, a100, "ddp", d)
    assert not cpu_on_gpu_size.passed and [j.name for j in cpu_on_gpu_size.failures] == ["device"]
    assert "has 8 x A100 40GB per node but the smoke ran with gloo on cpu" in cpu_on_gpu_size.failures[0].detail
    # Where infra's emulator stood in for the node (it sets the variable the script reports), it is skipped.
    verdict = judge(dict(result, node={"gpu_device_files": [], "emulated": True}), a100, "ddp", d)
    assert verdict.passed and verdict.transport == "gloo-tcp" and verdict.peak_busbw_gbs > 0
    outcomes = {j.name: j.outcome for j in verdict.judgements}
    assert outcomes["transport"] == "skipped" and outcomes["device"] == "skipped"


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


@pytest.mark.system_tools("mpirun")
def test_real_mpirun_four_ranks(scripts, tmp_path):
    port = free_port()
    env = clean_env()
    # Each rank's output to its own file, as Azure ML keeps it (std_log_process_N.txt): mpirun's forwarding
    # of the ranks' stdout to its own once lost rank 0's last line when the rank exited right after it.
    ranks_out = tmp_path / "ranks"
    cmd = ["mpirun", "-np", "4", "--oversubscribe", "--bind-to", "none", "--output-filename", str(ranks_out),
           "-x", f"AZ_BATCH_MASTER_NODE=127.0.0.1:{port}", "-x", "CUDA_VISIBLE_DEVICES",
           sys.executable, str(scripts / "ddp_smoke.py"), *smoke_args(tmp_path, 1, 4)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    logs = sorted(ranks_out.rglob("stdout"))
    assert len(logs) == 4, (logs, r.stdout, r.stderr)
    r.stdout = "".join(log.read_text() for log in logs)
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
    assert "WORLD_SIZE 2 != instance_count 1 x 3 processes per node = 3" in failed["world_size"]
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


def test_without_torch_the_result_says_so_and_the_emulators_fix_installs_it_where_infra_runs(scripts, tmp_path):
    """infra installed as the README's Installing section does (no `smoke` extra), then `infra apply --local`: the
    script died on `import torch` with a traceback and no result, so the finding was Azure's fix ("use an
    environment with PyTorch (a curated ACPT image...)") for a stack that already names one. The emulator runs
    jobs with infra's own Python: torch must go there."""
    from infra_cli.smoke.diagnose import diagnose

    # -S: without site-packages, an interpreter without torch (the script needs only the standard library first)
    r = subprocess.run([sys.executable, "-S", str(scripts / "ddp_smoke.py"), *smoke_args(tmp_path, 1, 1)],
                       env=clean_env(INFRA_EMULATED_NODE="1"), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    result = result_of(tmp_path)
    assert result["node"]["emulated"] and "torch is not importable here" in failed_checks(result)["torch"]
    [finding] = diagnose({"user_logs/std_log.txt": r.stdout}, emulated=True)[:1]
    assert f"{shlex.quote(sys.executable)} -m pip install torch==2.13.0 numpy" in finding.fix, finding.fix
    [finding] = diagnose({"user_logs/std_log.txt": r.stdout})[:1]   # on Azure: the environment lacks it
    assert "curated ACPT image" in finding.fix and "pip install torch" not in finding.fix


def tf_config(workers: int, ps: int, kind: str = "worker", index: int = 0, hosts: list[str] | None = None) -> str:
    cluster = {"worker": hosts or [f"10.0.0.{i}:2222" for i in range(workers)]}
    if ps:
        cluster["ps"] = [f"10.0.1.{i}:2222" for i in range(ps)]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


# Runs the script with TensorFlow hidden (an import of it raises ImportError), as in an image without it.
WITHOUT_TENSORFLOW = ("import runpy, sys; sys.modules['tensorflow'] = None; script = sys.argv.pop(1); "
                      "runpy.run_path(script, run_name='__main__')")


def tf_command(scripts: Path, out: Path, workers: int, ps: int, hide_tensorflow: bool) -> list[str]:
    prefix = [sys.executable, "-c", WITHOUT_TENSORFLOW] if hide_tensorflow else [sys.executable]
    return [*prefix, str(scripts / "tf_smoke.py"), "--worker-count", str(workers), "--parameter-server-count",
            str(ps), "--outputs", str(out)]


def run_tf(scripts: Path, out: Path, workers: int, ps: int, config: str | None) -> subprocess.CompletedProcess:
    env = clean_env(**({"TF_CONFIG": config} if config is not None else {}))
    return subprocess.run(tf_command(scripts, out, workers, ps, hide_tensorflow=True),
                          env=env, capture_output=True, text=True, timeout=TIMEOUT)


def tensorflow_or_skip():
    """CI installs TensorFlow (.ci/run sets INFRA_REQUIRE_TENSORFLOW=1, so there its absence fails)."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        if os.environ.get("INFRA_REQUIRE_TENSORFLOW") == "1":
            pytest.fail("INFRA_REQUIRE_TENSORFLOW=1 but TensorFlow is not importable: pip install -e '.[tf]'")
        pytest.skip("TensorFlow is not installed (pip install -e '.[tf]')")


def test_tf_config_checks_hold_without_tensorflow_but_the_smoke_is_incomplete(scripts, tmp_path):
    """Without TensorFlow the all-reduce never ran: the result is INCOMPLETE (not passed), naming what is missing;
    nothing that ran failed, so the script exits 0."""
    r = run_tf(scripts, tmp_path, 2, 0, tf_config(2, 0))
    assert r.returncode == 0, r.stdout + r.stderr
    result = result_of(tmp_path)
    assert not result["passed"] and result["task"] == {"type": "worker", "index": 0, "workers": 2, "ps": 0}
    assert "tensorflow is not importable here" in result["missing"]
    allreduce = next(c for c in result["checks"] if c["name"] == "allreduce")
    assert allreduce["ok"] is None and "tensorflow is not importable" in allreduce["detail"]
    assert result["device"] == "unknown" and "SMOKE INCOMPLETE" in r.stdout and "SMOKE PASS" not in r.stdout
    # On a GPU size that is no proof the GPUs work: the judge says so, with the first cause (TensorFlow missing),
    # as an INCOMPLETE smoke rather than a failure of the GPUs.
    d = Distribution(cluster="v100", environment="e", type="tensorflow", instance_count=2, worker_count=2)
    verdict = judge(result, load_catalog().get("Standard_ND40rs_v2"), "tf", d)
    assert not verdict.passed and not verdict.failures and "tensorflow is not importable" in verdict.incomplete
    device = next(j for j in verdict.judgements if j.name == "device")
    assert device.outcome == "skipped" and "never reached them: not run: tensorflow is not importable" in device.detail


def test_tf_multiworker_allreduce_for_real(scripts, tmp_path):
    """Two real TensorFlow workers on this CPU, TF_CONFIG as Azure ML writes it: MultiWorkerMirroredStrategy
    all-reduces over gRPC ring collectives, the sum proves both replicas took part, bandwidth is reported."""
    tensorflow_or_skip()
    hosts = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    procs = [subprocess.Popen(tf_command(scripts, tmp_path / f"w{i}", 2, 0, hide_tensorflow=False),
                              env=clean_env(TF_CONFIG=tf_config(2, 0, index=i, hosts=hosts), TF_CPP_MIN_LOG_LEVEL="2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    runs = [p.communicate(timeout=TIMEOUT) + (p.returncode,) for p in procs]
    for stdout, stderr, code in runs:
        assert code == 0, stdout + stderr
        summary = [l for l in stdout.splitlines() if l.startswith("SMOKE ")]
        assert len(summary) == 1 and summary[0].startswith("SMOKE PASS kind=tensorflow") and "backend=ring" in summary[0]
    assert not (tmp_path / "w1" / "smoke-result.json").exists(), "only worker 0 writes the result"
    result = result_of(tmp_path / "w0")
    assert result["passed"] and result["device"] == "cpu" and result["backend"] == "ring"
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["allreduce"]["ok"] and "over 2 replicas: sum 3 == 3" in checks["allreduce"]["detail"]
    assert result["world"]["world_size"] == 2 and result["world"]["ranks"] == [
        {"host": "worker-0", "gpus": 0}, {"host": "worker-1", "gpus": 0}]
    bw = result["bandwidth"]
    assert bw["world_size"] == 2 and bw["sizes"][-1]["bytes"] == 1 << 20 and bw["peak_busbw_gbs"] > 0
    for row in bw["sizes"]:  # nccl-tests' arithmetic, recomputed from what was measured
        assert row["algbw_gbs"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-9)
        assert row["busbw_gbs"] == pytest.approx(row["algbw_gbs"], rel=1e-9)  # 2(n-1)/n = 1 for n = 2
    assert result["nccl"]["transport"] == "grpc-tcp" and "NCCL is not used" in result["nccl"]["why"]


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


def test_a_framework_that_sees_another_world_fails_with_both_numbers(scripts, tmp_path):
    """Transformers' TrainingArguments under torchrun with 2 processes, for a stack of 1 node x 3: the
    framework's own view is checked by the script and by the judge, each saying both numbers."""
    from test_smoke_frameworks import need

    need("transformers", "accelerate")
    r = torchrun(scripts, 2, *smoke_args(tmp_path, 1, 3), "--framework", "transformers")
    assert r.returncode != 0
    result = result_of(tmp_path)
    assert result["framework"]["name"] == "transformers" and result["framework"]["world_size"] == 2
    assert ("transformers sees world size 2 != the stack's 1 nodes x 3 processes = 3"
            in failed_checks(result)["framework_world_size"])
    d = Distribution(cluster="c", environment="e", type="pytorch", framework="transformers", instance_count=1,
                     process_count_per_instance=3)
    verdict = judge(result, load_catalog().get("Standard_NC80adis_H100_v5"), "t", d)
    [framework] = [j for j in verdict.failures if j.name == "framework"]
    assert framework.detail == "transformers sees world size 2 but the stack describes 1 nodes x 3 processes = 3"


def test_a_missing_framework_ends_the_smoke_before_the_ddp_steps_and_the_sweep(scripts, tmp_path):
    """DeepSpeed not importable where the job ran: the smoke said so only after the DDP steps and the sweep (119 s
    at 2 x 8 ranks on the emulator); now the world is checked and the smoke ends, INCOMPLETE, with nothing
    measured that could not make it pass."""
    shim = tmp_path / "without"
    (shim / "deepspeed").mkdir(parents=True)
    (shim / "deepspeed" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'deepspeed'\", name='deepspeed')\n")
    env = clean_env(PYTHONPATH=os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH", "")) if p))
    out = tmp_path / "out"
    r = torchrun(scripts, 2, *smoke_args(out, 1, 2), "--framework", "deepspeed", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    result = result_of(out)
    assert "deepspeed is not importable here" in result["missing"] and result["passed"] is False
    assert "ddp" not in result and "bandwidth" not in result and result["world"]["world_size"] == 2
    assert not failed_checks(result) and "DDP replicas and the sweep not run" in r.stdout + r.stderr
    d = Distribution(cluster="c", environment="e", type="pytorch", framework="deepspeed", instance_count=1,
                     process_count_per_instance=2)
    verdict = judge(result, None, "ds", d)   # a size outside the catalog: only what the job itself found
    assert verdict.incomplete and not verdict.failures, [j for j in verdict.judgements if j.outcome == "fail"]
    assert {j.name: j.detail for j in verdict.judgements}["busbw"].startswith("not measured: deepspeed is not")
