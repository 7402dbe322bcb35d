"""`infra emulator reset` while an `infra apply --local` runs its own emulator over the same state directory (issue
40). Before, only an `infra emulator serve` was looked for: reset moved the database aside under the running
apply, which then said "Apply complete! Resources: 1 added" into a database no later command reads (the cloud was
empty). Every emulator now holds DIR/in-use.lock shared while it runs; reset refuses while it cannot take it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML, running_apply

ROOT = Path(__file__).resolve().parents[2]
STACK = f"stack: busy\n{WORKSPACE_YAML}clusters:\n  gpu: {{size: Standard_NC24ads_A100_v4, max_instances: 1}}\n"


def _env(state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("INFRA_EMULATOR_URL", "AZUREML_CURRENT_CLOUD")}
    env.update(INFRA_LOCAL_DIR=str(state), **extra)
    return env


def _infra(*args: str, state: Path) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT,
                       env=_env(state), timeout=300)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return r


def _apply_creating(stack: Path, state: Path) -> subprocess.Popen:
    """An `infra apply --local` (its own, in-process emulator) stopped in the middle: its cluster is being
    created (a provisioning delay longer than any test step)."""
    return running_apply(stack, _env(state, INFRA_EMULATOR_PROVISIONING_DELAY="20"))


def test_reset_refuses_while_an_apply_runs_the_local_cloud_and_the_apply_s_cluster_stays(tmp_path):
    state, stack = tmp_path / "local", tmp_path / "stack.yaml"
    stack.write_text(STACK)
    apply = _apply_creating(stack, state)
    try:
        r = _infra("emulator", "reset", "--dir", str(state), state=state)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "error[local.state-in-use]" in r.stderr and f"pid {apply.pid}" in r.stderr, r.stderr
        assert f"kill {apply.pid}" in r.stderr and "infra emulator reset --dir" in r.stderr, r.stderr
        assert (state / "state.sqlite3").exists() and not list(state.glob("state.sqlite3.aside-*"))   # nothing moved
        out, err = apply.communicate(timeout=300)
    finally:
        if apply.poll() is None:
            apply.kill()
            apply.wait(timeout=30)
    assert apply.returncode == 0 and "Resources: 1 added" in out, out + err
    listed = _infra("state", "list", str(stack), "--local", state=state)      # the apply's "1 added" is there
    assert listed.returncode == 0 and listed.stdout.split() == ["cluster.gpu"], listed.stdout + listed.stderr

    done = _infra("emulator", "reset", "--dir", str(state), state=state)        # nobody runs it now: moved aside
    assert done.returncode == 0 and "moved " in done.stdout, done.stdout + done.stderr
    assert not (state / "state.sqlite3").exists() and list(state.glob("state.sqlite3.aside-*"))


def test_a_killed_apply_leaves_no_hold_on_the_directory(tmp_path):
    """The hold is the kernel's (flock): a SIGKILLed apply, which cleans nothing up, holds nothing after it."""
    state, stack = tmp_path / "local", tmp_path / "stack.yaml"
    stack.write_text(STACK)
    apply = _apply_creating(stack, state)
    apply.send_signal(signal.SIGKILL)
    apply.communicate(timeout=60)
    r = _infra("emulator", "reset", "--dir", str(state), state=state)
    assert r.returncode == 0 and "moved " in r.stdout, r.stdout + r.stderr
