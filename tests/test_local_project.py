"""One local cloud per project, not per current directory: `--local` keeps its state in the .infra/local of the
stack's project (the nearest folder at or above the stack's own that holds .infra/ or .git, else the stack's
folder), says once where it created it, and INFRA_LOCAL_DIR still overrides."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra_cli.paths import local_project, local_state_dir

ROOT = Path(__file__).resolve().parents[1]
STACK = (ROOT / "stacks" / "ib-a100.yaml").read_text()


def _cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_")}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_project_is_the_nearest_folder_with_infra_or_git(tmp_path, monkeypatch):
    monkeypatch.delenv("INFRA_LOCAL_DIR", raising=False)
    repo = tmp_path / "repo"
    (repo / "stacks" / "team").mkdir(parents=True)
    (repo / ".git").mkdir()
    stack = repo / "stacks" / "team" / "x.yaml"
    assert local_project(stack) == repo
    assert local_state_dir(stack) == repo / ".infra" / "local"
    (repo / "stacks" / ".infra").mkdir()                  # a project inside the repository: the nearer wins
    assert local_project(stack) == repo / "stacks"
    loose = tmp_path / "loose" / "s.yaml"
    loose.parent.mkdir()
    assert local_project(loose) == loose.parent            # nothing above: the stack's own folder
    monkeypatch.chdir(repo / "stacks" / "team")
    assert local_project() == repo / "stacks"              # no stack (skus, emulator serve): the current folder's
    monkeypatch.setenv("INFRA_LOCAL_DIR", str(tmp_path / "elsewhere"))
    assert local_state_dir(stack) == tmp_path / "elsewhere"


def test_the_repository_root_and_stacks_folder_see_one_cloud(tmp_path):
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "stacks" / "ib-a100.yaml").write_text(STACK)
    applied = _cli("apply", "stacks/ib-a100.yaml", "--local", "--auto-approve", "--no-smoke", cwd=repo)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    state = repo / ".infra" / "local"
    assert f"Local Azure: a new, empty cloud in {state}" in applied.stderr, applied.stderr
    # from stacks/, the same cloud: the cluster exists, and nothing is said about a new one
    listed = _cli("state", "list", "ib-a100.yaml", "--local", cwd=repo / "stacks")
    assert listed.returncode == 0 and listed.stdout.split() == ["cluster.a100"], listed.stdout + listed.stderr
    assert "new, empty cloud" not in listed.stderr
    assert not (repo / "stacks" / ".infra").exists()
    planned = _cli("plan", "../stacks/ib-a100.yaml", "--local", cwd=repo / ".git")
    assert planned.returncode == 0 and "cluster.a100" not in planned.stdout.split("Plan:")[-1], planned.stdout
    # a saved plan applies in the cloud of the stack it names, wherever the plan file is
    saved = tmp_path / "outside" / "destroy.plan"
    saved.parent.mkdir()
    made = _cli("plan", "stacks/ib-a100.yaml", "--local", "--destroy", "--out", str(saved), cwd=repo)
    assert made.returncode == 0, made.stdout + made.stderr
    done = _cli("apply", str(saved), "--local", cwd=repo)
    assert done.returncode == 0 and "1 destroyed" in done.stdout, done.stdout + done.stderr
    assert not (saved.parent / ".infra").exists()
    other = _cli("state", "list", "stacks/ib-a100.yaml", "--local", cwd=repo, INFRA_LOCAL_DIR=str(tmp_path / "o"))
    assert other.returncode == 0 and other.stdout.split() == [] and (tmp_path / "o").is_dir()
    # after `infra emulator reset`, the next command says the cloud it uses is a new, empty one
    reset = _cli("emulator", "reset", cwd=repo / "stacks")
    assert reset.returncode == 0 and f"moved {state / 'state.sqlite3'} to" in reset.stdout, reset.stdout + reset.stderr
    fresh = _cli("state", "list", "stacks/ib-a100.yaml", "--local", cwd=repo)
    assert fresh.returncode == 0 and f"Local Azure: a new, empty cloud in {state}" in fresh.stderr, fresh.stderr


def test_a_made_infra_folder_keeps_its_cloud_out_of_git(tmp_path):
    """`.infra/` (token, TLS key, state) never shows in `git status`: infra writes `.infra/.gitignore` when it
    makes the folder, and leaves a `.infra/` the user made (it may hold files they commit) as it is."""
    from infra_cli.private_state import private_state_dir

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "s.yaml").write_text(STACK)
    private_state_dir(local_state_dir(repo / "s.yaml"))
    (repo / ".infra" / "local" / "token").write_text("secret")
    shown = subprocess.run(["git", "status", "--porcelain", "--ignored=no"], cwd=repo, capture_output=True,
                           text=True, check=True).stdout
    assert shown == "?? s.yaml\n", shown
    mine = tmp_path / "mine"
    (mine / ".infra").mkdir(parents=True)
    (mine / ".infra" / "policy.txt").write_text("committed\n")
    private_state_dir(mine / ".infra" / "local")
    assert not (mine / ".infra" / ".gitignore").exists()
