"""`infra smoke STACK --local`: the real SDK submits the rendered smoke job to the emulator, which runs the
real script (gloo on this CPU); the verdict comes back with its numbers. ib-a100's (2 nodes x 8 processes, with
`--report`) runs once, in the shipped stacks' walk (tests/test_shipped_stacks.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_smoke_script import tensorflow_or_skip

pytestmark = pytest.mark.runs_jobs   # jobs on the emulator: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent


def infra(*args: str, state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "INFRA_LOCAL_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def assert_clean_stderr(stderr: str) -> None:
    assert "Traceback" not in stderr and "experimental class" not in stderr
    assert "\x1b[" not in stderr, "no escape codes (azure-ai-ml prints a colour reset after uploads) off a terminal"


def test_infra_smoke_local_tensorflow_multiworker(tmp_path):
    """The tensorflow distribution on the emulator: TF_CONFIG as Azure ML writes it, two real TensorFlow
    workers all-reduce with MultiWorkerMirroredStrategy, and the verdict reports the bandwidth."""
    tensorflow_or_skip()
    state = tmp_path / "state"
    stack = str(ROOT / "stacks" / "tf-multiworker.yaml")
    applied = infra("apply", stack, "--auto-approve", "--local", "--no-smoke", state=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    r = infra("smoke", stack, "--local", state=state)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "(2 node(s) of azureml:v100, tensorflow distribution)" in out
    assert "smoke.multiworker: PASSED  transport=grpc-tcp  busbw=" in out
    assert "pass    check.worker_count: 2 workers in TF_CONFIG, 2 expected" in out
    assert ("pass    check.allreduce: MultiWorkerMirroredStrategy all-reduce of replica ids + 1 over 2 replicas: "
            "sum 3 == 3") in out
    assert "pass    check.bandwidth_measured: peak busbw" in out
    assert "skipped device: the local emulator ran the job on this machine's cpu: Standard_ND40rs_v2's" in out
    assert "skipped transport: ran with ring backend on cpu" in out
    assert "Smoke: 1 of 1 passed." in out
    assert_clean_stderr(r.stderr)


def test_infra_smoke_unknown_distribution_is_refused(tmp_path):
    r = infra("smoke", str(ROOT / "stacks" / "ib-a100.yaml"), "--distribution", "nope", "--local",
              state=tmp_path / "state")
    assert r.returncode == 1
    assert "error[smoke.unknown-distribution]" in r.stderr and "pick one of: ddp" in r.stderr
    assert "Traceback" not in r.stderr


def test_infra_smoke_missing_stack_file(tmp_path):
    r = infra("smoke", str(tmp_path / "missing.yaml"), "--local", state=tmp_path / "state")
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_a_failed_smoke_says_why_from_the_logs(tmp_path):
    """A real misconfiguration (a NIC the node lacks) makes every rank die at init on the emulator: the verdict
    fails and names the cause and fix once, read from the four ranks' logs the SDK downloaded."""
    text = (ROOT / "stacks" / "ib-a100.yaml").read_text()
    text = text.replace("process_count_per_instance: 8", "process_count_per_instance: 2").replace(
        "    smoke:\n", "    environment_variables: {GLOO_SOCKET_IFNAME: nosuchnic0}\n    smoke:\n")
    stack = tmp_path / "misconfigured.yaml"
    stack.write_text(text)
    state = tmp_path / "state"
    applied = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    r = infra("smoke", str(stack), "--local", "--json", state=state)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "smoke.ddp: FAILED" in r.stderr and "fail    job: job " in r.stderr
    assert "why     GLOO_SOCKET_IFNAME names network interface 'nosuchnic0', which the node does not have" in r.stderr
    assert "seen in user_logs/std_log_process_0.txt (+3 more):" in r.stderr
    [verdict] = json.loads(r.stdout)
    [finding] = verdict["findings"]
    assert finding["signature"] == "gloo-interface-missing" and len(finding["logs"]) == 4
    assert "Unable to find address for: nosuchnic0" in finding["lines"][0]
    assert_clean_stderr(r.stderr)


def test_smoke_before_apply_says_to_apply_first_and_json_stays_json(tmp_path):
    """`infra smoke` before any apply: nothing is submitted; each missing cluster and custom environment is an
    error at the distribution's line whose hint is the apply to run (with --local, as this run was); with
    --json the same diagnostics as JSON on stdout, no text."""
    state = tmp_path / "state"
    rel = "stacks/mpi-deepspeed.yaml"
    r = infra("smoke", rel, "--local", state=state)
    assert r.returncode == 1 and r.stdout == "", r.stdout
    assert f"{rel}:24:14: error[smoke.not-applied]: smoke.deepspeed: cluster 'a100-80-deepspeed' does not exist" \
        in r.stderr, r.stderr
    assert "error[smoke.not-applied]: smoke.deepspeed: environment 'openmpi-deepspeed' does not exist" in r.stderr
    assert f"hint: run `infra apply {rel} --local` first" in r.stderr and "Azure refused" not in r.stderr
    assert_clean_stderr(r.stderr)
    r = infra("smoke", rel, "--local", "--json", state=state)
    assert r.returncode == 1 and r.stderr == "", r.stderr
    diagnostics = json.loads(r.stdout)
    assert [d["rule"] for d in diagnostics] == ["smoke.not-applied"] * 2
    assert all(d["hint"].startswith(f"run `infra apply {rel} --local` first") for d in diagnostics)
