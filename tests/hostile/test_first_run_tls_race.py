"""Concurrent first runs over a fresh state directory share one TLS pair (issue 40). Before, each process that found
no certificate made its own pair and wrote it over the other's: one emulator served the first pair while its
client trusted the second one's DIR/cert.pem, and the run failed with "CERTIFICATE_VERIFY_FAILED: self-signed
certificate" (some of the time). The pair is now made under DIR/cert.lock and looked at again once it is had."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML

ROOT = Path(__file__).resolve().parents[2]
STACK = f"stack: race\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}\n"
RACERS = 4
ROUNDS = 3

# Each racer says it is up (one byte), waits for one byte on its standard input, then runs the CLI in the same
# process (no interpreter start between the gate and the race): all of them reach the empty directory together.
GATE = ("import sys, runpy; sys.stdout.write('R'); sys.stdout.flush(); sys.stdin.read(1); "
        "sys.argv = ['infra', *sys.argv[1:]]; runpy.run_module('infra_cli', run_name='__main__')")


def _race(stack: Path, state: Path, *args: str) -> list[subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if k not in ("INFRA_EMULATOR_URL", "AZUREML_CURRENT_CLOUD")}
    env.update(INFRA_LOCAL_DIR=str(state))
    procs = [subprocess.Popen([sys.executable, "-c", GATE, *args, str(stack), "--local"], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(RACERS)]
    for proc in procs:      # every racer up (its interpreter started) before any is let go
        assert proc.stdout.read(1) == "R", proc.stderr.read()
    for proc in procs:
        proc.stdin.write("g")
        proc.stdin.flush()
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_concurrent_first_plans_over_a_fresh_directory_share_one_pair(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    for round_ in range(ROUNDS):
        state = tmp_path / f"local-{round_}"
        for r in _race(stack, state, "plan"):
            assert r.returncode == 0, f"round {round_}:\n{r.stdout}{r.stderr}"
            assert "CERTIFICATE_VERIFY_FAILED" not in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert "Plan: 1 to add" in r.stdout, r.stdout
        pem = (state / "cert.pem").read_text()
        assert pem.count("BEGIN CERTIFICATE") == 1
        assert not [p.name for p in state.iterdir() if p.name.startswith(".cert.pem.")]   # no temporary left


def test_concurrent_first_applies_create_the_cluster_once(tmp_path):
    """Two first applies at once: one creates the cluster, the other finds the lock or the cluster; neither meets
    a certificate it does not trust, and the cloud they share holds the one cluster."""
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    state = tmp_path / "local"
    runs = _race(stack, state, "apply", "--auto-approve", "--no-smoke")
    for r in runs:
        assert "CERTIFICATE_VERIFY_FAILED" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert r.returncode == 0 or "is locked by" in r.stderr, r.stdout + r.stderr
    assert any("Resources: 1 added" in r.stdout for r in runs), [r.stdout + r.stderr for r in runs]
    env = {k: v for k, v in os.environ.items() if k not in ("INFRA_EMULATOR_URL", "AZUREML_CURRENT_CLOUD")}
    listed = subprocess.run([sys.executable, "-m", "infra_cli", "state", "list", str(stack), "--local"], cwd=ROOT,
                            env={**env, "INFRA_LOCAL_DIR": str(state)}, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0 and listed.stdout.split() == ["cluster.gpu"], listed.stdout + listed.stderr
