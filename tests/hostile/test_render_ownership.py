"""`infra render` owns its files per stack (issue 40): several stacks render into one --out, each removing only
the files its own render wrote, and a manifest entry counts only when render itself signed it (an HMAC under the
user's render key), so a forged `.infra-render.json` entry removes nothing, even with the right sha256.

Before: the second stack's render into one --out deleted the first stack's files; an entry `{"notes.txt": SHA}` with
the sha256 of a file the user wrote made render delete it. Two mutations no test noticed are held here too: render
into infra's own templates folder, and an interrupted render never removing the earlier render's stale files.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ("workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, "
             "location: eastus}\n")
ALPHA = f"""\
stack: alpha
{WORKSPACE}clusters:
  alp1: {{size: Standard_ND96asr_v4, max_instances: 2}}
  alp2: {{size: Standard_ND96asr_v4, max_instances: 2}}
"""
BETA = f"""\
stack: beta
{WORKSPACE}clusters:
  bet1: {{size: Standard_ND96asr_v4, max_instances: 2}}
  bet2: {{size: Standard_ND96asr_v4, max_instances: 2}}
"""


def infra(*args: str, cwd: Path, state: Path, limit_bytes: int | None = None, **env: str) -> subprocess.CompletedProcess:
    """`infra ARGS` with its own render key folder (XDG_STATE_HOME=state); `limit_bytes`: no file written may grow
    past it (RLIMIT_FSIZE, as `ulimit -f`: the write fails with EFBIG, as on a full disk)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("INFRA_DEBUG", "INFRA_PLAN_KEY")}
    environ.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(state), **env)

    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=environ, preexec_fn=limit)


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "stack.yaml").write_text(ALPHA)
    (tmp_path / "beta").mkdir()
    (tmp_path / "beta" / "stack.yaml").write_text(BETA)
    return tmp_path


def render(work: Path, stack: str, out: Path, **kw) -> subprocess.CompletedProcess:
    return infra("render", str(work / stack / "stack.yaml"), "--out", str(out), cwd=work, state=work / "state", **kw)


def manifest(out: Path) -> dict:
    return json.loads((out / ".infra-render.json").read_text())


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- several stacks, one folder ------------------------------------------------------------------------------

def test_two_stacks_render_into_one_out_and_neither_deletes_the_others_files(work):
    out = work / "out"
    assert render(work, "alpha", out).returncode == 0
    r = render(work, "beta", out)
    assert r.returncode == 0, r.stderr
    assert "render.removed" not in r.stderr, r.stderr
    for name in ("alp1", "alp2", "bet1", "bet2"):
        assert (out / "clusters" / f"{name}.yml").is_file(), name
    stacks = manifest(out)["stacks"]
    assert set(stacks["alpha"]["files"]) == {"clusters/alp1.yml", "clusters/alp2.yml"}
    assert set(stacks["beta"]["files"]) == {"clusters/bet1.yml", "clusters/bet2.yml"}
    # each stack's re-render removes its own stale file, and only that
    (work / "alpha" / "stack.yaml").write_text(ALPHA.replace("  alp2: {size: Standard_ND96asr_v4, max_instances: 2}\n", ""))
    r = render(work, "alpha", out)
    assert r.returncode == 0, r.stderr
    assert not (out / "clusters" / "alp2.yml").exists()
    assert f"info[render.removed]: removed {out / 'clusters' / 'alp2.yml'}" in r.stderr
    assert {p.name for p in (out / "clusters").iterdir()} == {"alp1.yml", "bet1.yml", "bet2.yml"}
    assert set(manifest(out)["stacks"]["beta"]["files"]) == {"clusters/bet1.yml", "clusters/bet2.yml"}
    assert render(work, "beta", out).returncode == 0
    assert {p.name for p in (out / "clusters").iterdir()} == {"alp1.yml", "bet1.yml", "bet2.yml"}


def test_a_file_another_stacks_render_wrote_is_refused_not_overwritten(work):
    out = work / "out"
    assert render(work, "alpha", out).returncode == 0
    before = (out / "clusters" / "alp1.yml").read_bytes()
    (work / "beta" / "stack.yaml").write_text(BETA.replace("  bet1:", "  alp1:"))   # beta names a cluster alp1 too
    r = render(work, "beta", out)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert (f"error[render.file-of-another-stack]: {out / 'clusters' / 'alp1.yml'} was written by a render of stack "
            "'alpha', which still owns it: a render of stack 'beta' writes over no other stack's file; nothing was "
            "written") in r.stderr, r.stderr
    assert "hint: render each stack into its own folder" in r.stderr
    assert (out / "clusters" / "alp1.yml").read_bytes() == before and not (out / "clusters" / "bet2.yml").exists()
    # the way out the hint names: delete alpha's file, and beta's render takes the place
    (out / "clusters" / "alp1.yml").unlink()
    r = render(work, "beta", out)
    assert r.returncode == 0, r.stderr
    stacks = manifest(out)["stacks"]
    assert "clusters/alp1.yml" in stacks["beta"]["files"] and "clusters/alp1.yml" not in stacks["alpha"]["files"]


# ---- a manifest entry counts only when render signed it -----------------------------------------------------

def test_a_forged_entry_with_the_right_sha256_removes_nothing(work):
    out = work / "out"
    assert render(work, "alpha", out).returncode == 0
    notes = out / "notes.txt"
    notes.write_text("the user's own notes\n")
    forged = manifest(out)
    forged["stacks"]["alpha"]["files"]["notes.txt"] = {"sha256": sha(notes)}                  # no signature
    forged["stacks"]["alpha"]["files"]["clusters/mine.yml"] = {"sha256": sha(notes), "hmac": "hmac-sha256:" + "0" * 64}
    (out / "clusters" / "mine.yml").write_text("the user's own notes\n")
    (out / ".infra-render.json").write_text(json.dumps(forged))
    r = render(work, "alpha", out)
    assert r.returncode == 0, r.stderr
    assert notes.read_text() == "the user's own notes\n" and (out / "clusters" / "mine.yml").is_file()
    assert "warning[render.manifest-unsigned]: 2 entries of" in r.stderr, r.stderr
    assert "notes.txt" not in manifest(out)["stacks"]["alpha"]["files"]   # dropped, never trusted later


def test_an_entry_signed_under_another_key_removes_nothing(work, tmp_path):
    """The manifest of a render made with another user's key (a folder downloaded, a checkout): its entries are
    well-formed and signed, but not by this user: nothing is removed."""
    out = work / "out"
    other = infra("render", str(work / "alpha" / "stack.yaml"), "--out", str(out), cwd=work, state=tmp_path / "other")
    assert other.returncode == 0, other.stderr
    (work / "alpha" / "stack.yaml").write_text(ALPHA.replace("  alp2: {size: Standard_ND96asr_v4, max_instances: 2}\n", ""))
    r = render(work, "alpha", out)
    assert r.returncode == 0, r.stderr
    assert (out / "clusters" / "alp2.yml").is_file()
    assert "warning[render.manifest-unsigned]: 2 entries of" in r.stderr, r.stderr


def test_an_entry_moved_to_another_stack_removes_nothing(work):
    """An HMAC binds an entry to its stack: alpha's signed entries relabelled as beta's are not beta's to remove."""
    out = work / "out"
    assert render(work, "alpha", out).returncode == 0
    doc = manifest(out)
    doc["stacks"]["beta"] = doc["stacks"].pop("alpha")
    (out / ".infra-render.json").write_text(json.dumps(doc))
    r = render(work, "beta", out)
    assert r.returncode == 0, r.stderr
    assert (out / "clusters" / "alp1.yml").is_file() and (out / "clusters" / "alp2.yml").is_file()
    assert "warning[render.manifest-unsigned]" in r.stderr


def test_an_older_unsigned_manifest_removes_nothing(work):
    out = work / "out"
    (out / "clusters").mkdir(parents=True)
    victim = out / "clusters" / "kept.yml"
    victim.write_text("precious\n")
    (out / ".infra-render.json").write_text(json.dumps({"format_version": 1, "files": {"clusters/kept.yml": sha(victim)}}))
    r = render(work, "alpha", out)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n"
    assert "warning[render.manifest-unsigned]: 1 entry of" in r.stderr


def test_the_render_key_is_private_and_one_others_may_read_is_not_trusted(work):
    out = work / "out"
    assert render(work, "alpha", out).returncode == 0
    key = work / "state" / "infra" / "render.key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    assert (work / "state" / "infra").stat().st_mode & 0o077 == 0
    key.chmod(0o644)   # anyone could have read it: what it signed proves nothing
    (work / "alpha" / "stack.yaml").write_text(ALPHA.replace("  alp2: {size: Standard_ND96asr_v4, max_instances: 2}\n", ""))
    r = render(work, "alpha", out)
    assert r.returncode == 0, r.stderr
    assert (out / "clusters" / "alp2.yml").is_file()
    assert "warning[render.key-unavailable]" in r.stderr and "render.key must be a regular file" in r.stderr, r.stderr


def test_infra_plan_key_signs_the_manifest_and_the_user_key_still_counts(work):
    """With INFRA_PLAN_KEY (a CI secret) the entries are signed under a key derived from it, so a render folder
    kept between CI runs is recognised; entries the user's own key signed still count."""
    out = work / "out"
    assert render(work, "alpha", out).returncode == 0   # signed with the user's key
    r = render(work, "alpha", out, INFRA_PLAN_KEY="ci-secret")
    assert r.returncode == 0 and "render.manifest-unsigned" not in r.stderr, r.stderr
    (work / "alpha" / "stack.yaml").write_text(ALPHA.replace("  alp2: {size: Standard_ND96asr_v4, max_instances: 2}\n", ""))
    shutil.rmtree(work / "state")   # a fresh CI machine: no user key of before, the same INFRA_PLAN_KEY
    r = render(work, "alpha", out, INFRA_PLAN_KEY="ci-secret")
    assert r.returncode == 0 and "render.manifest-unsigned" not in r.stderr, r.stderr
    assert not (out / "clusters" / "alp2.yml").exists()
    shutil.rmtree(work / "state")   # another CI secret: the entries are not its
    (work / "alpha" / "stack.yaml").write_text(ALPHA.replace("  alp1:", "  alp0:"))
    r = render(work, "alpha", out, INFRA_PLAN_KEY="another-secret")
    assert r.returncode == 0 and "warning[render.manifest-unsigned]" in r.stderr, r.stderr
    assert (out / "clusters" / "alp1.yml").is_file()


# ---- held mutations --------------------------------------------------------------------------------------------

def test_render_into_infras_own_templates_folder_is_refused(work, tmp_path):
    templates = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", templates)
    before = sorted(str(p.relative_to(templates)) for p in templates.rglob("*"))
    for out in (templates, templates / "smoke", templates / "rendered"):
        r = render(work, "alpha", out, INFRA_TEMPLATES_DIR=str(templates))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "error[render.out-overlaps-input]" in r.stderr and "infra's templates" in r.stderr, r.stderr
    assert sorted(str(p.relative_to(templates)) for p in templates.rglob("*")) == before


def test_an_interrupted_render_leaves_no_file_the_next_render_cannot_remove(work):
    """A render stopped half way (a write fails: EFBIG under `ulimit -f`, as on a full disk) lists what it wrote with
    the earlier render's entries, so the next render still removes both: the earlier render's stale files and the
    files the interrupted one wrote for what the stack no longer has."""
    stack = work / "alpha" / "stack.yaml"
    out = work / "out"
    assert render(work, "alpha", out).returncode == 0              # alp1, alp2
    (work / "alpha" / "src").mkdir()
    (work / "alpha" / "src" / "train.py").write_text("print(1)\n")
    (work / "alpha" / "src" / "weights.bin").write_bytes(b"\1" * 300_000)   # copied last, under code/
    interrupted = ALPHA.replace("  alp2: {size: Standard_ND96asr_v4, max_instances: 2}\n",
                                "  alp3: {size: Standard_ND96asr_v4, max_instances: 2}\n") + """\
environments:
  acpt: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  train: {cluster: alp1, environment: acpt, code: src, command: python train.py, type: pytorch,
          process_count_per_instance: 8, smoke: {enabled: false}}
"""
    stack.write_text(interrupted)
    r = render(work, "alpha", out, limit_bytes=200_000)
    assert r.returncode == 1 and "error[render.write]" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert (out / "clusters" / "alp3.yml").is_file() and not (out / "code" / "train" / "weights.bin").exists()
    listed = manifest(out)["stacks"]["alpha"]["files"]
    assert {"clusters/alp2.yml", "clusters/alp3.yml"} <= set(listed)   # the earlier render's and the interrupted one's
    stack.write_text(ALPHA.replace("  alp2: {size: Standard_ND96asr_v4, max_instances: 2}\n", ""))   # alp1 only
    r = render(work, "alpha", out)
    assert r.returncode == 0, r.stderr
    left = {str(p.relative_to(out)) for p in out.rglob("*") if not p.is_dir()}
    assert left == {"clusters/alp1.yml", ".infra-render.json"}, (left, r.stderr)


def test_renders_into_one_folder_take_turns(work):
    """Two stacks' renders into one folder at once each read the manifest the other wrote, so neither's entries are
    lost (a lost entry is a file no render removes again): the second waits for the folder's lock (flock) before it
    reads the manifest. Held here by taking the lock ourselves: the render waits (the kernel lists it as a blocked
    FLOCK waiter on the folder, /proc/locks), writes nothing meanwhile, and finishes with both stacks listed."""
    import fcntl

    out = work / "out"
    assert render(work, "alpha", out).returncode == 0
    written = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    inode = os.stat(out).st_ino
    lock = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    environ = {k: v for k, v in os.environ.items() if k not in ("INFRA_DEBUG", "INFRA_PLAN_KEY")}
    environ.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(work / "state"))
    beta = subprocess.Popen([sys.executable, "-m", "infra_cli", "render", str(work / "beta" / "stack.yaml"), "--out",
                             str(out)], cwd=work, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = False
        while not waiting and beta.poll() is None:
            waiting = any("->" in line and "FLOCK" in line and f":{inode} " in line
                          for line in Path("/proc/locks").read_text().splitlines())
            time.sleep(0.02)   # a poll, not a bound: the render may take as long as it takes to reach the lock
        assert waiting, f"the render did not wait for the folder's lock: {beta.communicate()}"
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == written
    finally:
        os.close(lock)
    stdout, stderr = beta.communicate(timeout=120)
    assert beta.returncode == 0, stderr
    assert set(manifest(out)["stacks"]) == {"alpha", "beta"}
