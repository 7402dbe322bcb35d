"""Local state (issue 31): every file infra writes in its state directory is written through no link planted there,
and `infra emulator reset` refuses while an `infra emulator serve` holds the directory (two clouds otherwise)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _infra(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("INFRA_EMULATOR_URL", "AZUREML_CURRENT_CLOUD")}
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=120, **kwargs)
    assert "Traceback" not in r.stderr, r.stderr
    return r


# ---- reset while a serve holds the directory -----------------------------------------------------------------

def _serve(state: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "INFRA_EMULATOR_URL"}
    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", "emulator", "serve", "--dir", str(state)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()      # printed once it serves (its lock is written before that)
    assert "infra local Azure emulator: https://127.0.0.1:" in first, first + proc.stderr.read()
    return proc


def _stop(proc: subprocess.Popen, sig: int) -> None:
    proc.send_signal(sig)
    proc.wait(timeout=30)


def test_reset_refuses_while_a_serve_holds_the_directory_and_names_it(tmp_path):
    state = tmp_path / "local"
    serve = _serve(state)
    try:
        [lock] = state.glob("serve-*.lock")
        record = json.loads(lock.read_text())
        assert record["pid"] == serve.pid and record["url"].startswith("https://127.0.0.1:")
        assert oct(lock.stat().st_mode & 0o777) == "0o600"
        r = _infra("emulator", "reset", "--dir", str(state))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "error[local.state-served]" in r.stderr and f"pid {serve.pid}" in r.stderr, r.stderr
        assert f"kill {serve.pid}" in r.stderr and record["url"] in r.stderr
        assert (state / "state.sqlite3").exists() and not list(state.glob("state.sqlite3.aside-*"))   # nothing moved
    finally:
        _stop(serve, signal.SIGINT)         # Ctrl-C: the serve stops cleanly and removes its lock
    assert not list(state.glob("serve-*.lock"))
    r = _infra("emulator", "reset", "--dir", str(state))
    assert r.returncode == 0 and "moved " in r.stdout, r.stderr
    assert not (state / "state.sqlite3").exists() and list(state.glob("state.sqlite3.aside-*"))


def test_a_killed_serves_lock_is_ignored_and_a_reused_pid_is_not_a_serve(tmp_path):
    state = tmp_path / "local"
    serve = _serve(state)
    _stop(serve, signal.SIGKILL)            # no cleanup: its lock stays, naming a dead process
    assert len(list(state.glob("serve-*.lock"))) == 1
    # a lock naming a live process (this one) with another start time: the pid was reused, not a serve
    (state / f"serve-{os.getpid()}.lock").write_text(json.dumps({"pid": os.getpid(), "start": "1", "url": None}))
    r = _infra("emulator", "reset", "--dir", str(state))
    assert r.returncode == 0, r.stderr
    assert "moved " in r.stdout and list(state.glob("state.sqlite3.aside-*"))


def test_a_serve_writes_its_lock_through_no_link(tmp_path):
    """The serve's lock is a state file too: a link planted at it is replaced, not written through."""
    state = tmp_path / "local"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    serve = _serve_with_links(state, victim)
    try:
        assert victim.read_text() == "precious\n"
        lock = state / f"serve-{serve.pid}.lock"
        assert not lock.is_symlink() and json.loads(lock.read_text())["pid"] == serve.pid
    finally:
        _stop(serve, signal.SIGINT)


def _serve_with_links(state: Path, victim: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "INFRA_EMULATOR_URL"}
    # A shell that waits for a line, then execs the serve (same pid): the link is planted at that pid's lock first.
    proc = subprocess.Popen(["sh", "-c", f'read go; exec "{sys.executable}" -m infra_cli emulator serve --dir "$0"',
                             str(state)], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    (state / f"serve-{proc.pid}.lock").symlink_to(victim)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    first = proc.stdout.readline()
    assert "infra local Azure emulator" in first, first + proc.stderr.read()
    return proc


# ---- ca-bundle.pem -------------------------------------------------------------------------------------------

def test_the_ca_bundle_is_written_through_no_link(tmp_path, monkeypatch):
    from infra_cli.azure.clients import trust_emulator_certificate
    from infra_cli.emulator.tls import ensure_certificate

    state = tmp_path / "local"
    state.mkdir(mode=0o700)
    cert, _ = ensure_certificate(state)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (state / "ca-bundle.pem").symlink_to(victim)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    trust_emulator_certificate(cert)
    assert victim.read_text() == "precious\n"
    bundle = state / "ca-bundle.pem"
    assert not bundle.is_symlink() and bundle.read_bytes().endswith(cert.read_bytes())
    assert os.environ["REQUESTS_CA_BUNDLE"] == str(bundle)


# ---- a job's folder in the state directory -------------------------------------------------------------------

def test_a_job_writes_nothing_through_a_link_at_its_workspace_folder(clients, emulator, tmp_path):
    """jobs/WORKSPACE/NAME/node-N/ holds the job's code and its launcher's files: a link at jobs/WORKSPACE would
    have had them written (and the old run's folder deleted) wherever it points. The job fails instead."""
    from azure.ai.ml import command
    from azure.ai.ml.entities import AmlCompute, Environment

    clients.ml.compute.begin_create_or_update(AmlCompute(name="cpu", size="Standard_ND96asr_v4", max_instances=1)).result()
    clients.ml.environments.create_or_update(Environment(name="runtime", version="1", image="mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "hello.py").write_text("print('hello')\n")
    jobs = emulator.state_dir / "jobs"
    jobs.mkdir(mode=0o700, exist_ok=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("precious\n")
    workspace_folder = jobs / emulator_scope_key(clients)
    workspace_folder.symlink_to(victim, target_is_directory=True)
    name = clients.ml.jobs.create_or_update(command(code=str(src), command="python hello.py",
                                                    environment="runtime:1", compute="cpu")).name
    deadline = time.time() + 60
    while (job := clients.ml.jobs.get(name)).status not in ("Completed", "Failed", "Canceled") and time.time() < deadline:
        time.sleep(0.2)
    assert job.status == "Failed"
    assert sorted(p.name for p in victim.iterdir()) == ["keep"] and (victim / "keep").read_text() == "precious\n"
    assert workspace_folder.is_symlink()


def emulator_scope_key(clients) -> str:
    ml = clients.ml
    return f"{ml.subscription_id}/{ml.resource_group_name}/{ml.workspace_name}".lower().replace("/", "_")
