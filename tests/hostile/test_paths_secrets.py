"""Hostile paths, secrets and names (issue: hardening pass, items 8, 10 and 11): files outside the stack's
project, symlinks out of a build context, modes widened by render, ${VAR} values written to disk or left
world-readable, and names Azure rejects."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from emulator_fixtures import start_emulator  # noqa: E402

from infra_cli.validate.engine import validate_files  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ("workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, "
             "name: mlw, location: eastus}\n")


def infra(*args: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "INFRA_DEBUG"}
    environ.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=environ)


def diagnostics(stack: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for d in validate_files([stack]):
        out.setdefault(d.rule, []).append(d)
    return out


def line_of(stack: Path, text: str) -> int:
    return next(i for i, line in enumerate(stack.read_text().splitlines(), 1) if text in line)


def tree_text(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())


# ---- item 8: files a stack names stay inside its project ------------------------------------------------------

@pytest.fixture
def outside(tmp_path) -> Path:
    """A directory beside the project with a private key in it."""
    d = tmp_path / "outside"
    (d / ".ssh").mkdir(parents=True)
    (d / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- TOPSECRET\n")
    (d / "Dockerfile").write_text("FROM ubuntu:22.04\n")
    return d


def test_paths_outside_the_project_are_errors_at_their_line(tmp_path, outside):
    project = tmp_path / "project"
    (project / "ctx").mkdir(parents=True)
    (project / "ctx" / "Dockerfile").write_text("FROM ubuntu:22.04\n")
    (project / "conda-link.yaml").symlink_to(outside / ".ssh" / "id_rsa")  # inside by name, outside by target
    stack = project / "stack.yaml"
    stack.write_text("stack: paths\n" + WORKSPACE + """\
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 1}
environments:
  up: {image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04", conda_file: ../outside/.ssh/id_rsa}
  linked: {image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04", conda_file: conda-link.yaml}
  ctxout: {build: {path: ../outside}}
  dockerout: {build: {path: ctx, dockerfile_path: ../../outside/.ssh/id_rsa}}
distributions:
  d: {cluster: gpu, environment: up, type: pytorch, process_count_per_instance: 8, command: python t.py, code: ../outside}
""")
    found = diagnostics(stack)
    outside_project = found.get("paths.outside-project", [])
    assert sorted((d.line, d.severity) for d in outside_project) == [
        (line_of(stack, "  up: {"), "error"), (line_of(stack, "linked:"), "error"),
        (line_of(stack, "ctxout:"), "error"), (line_of(stack, "  d: {cluster"), "error")]
    assert all(d.hint and "project" in d.hint and str(project) in d.message for d in outside_project)
    (escape,) = found["paths.outside-context"]
    assert escape.line == line_of(stack, "dockerout:") and escape.severity == "error" and escape.hint


def test_the_git_work_tree_is_the_project(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)  # a work tree: files beside the stack's directory are inside it
    (repo / "shared").mkdir()
    (repo / "shared" / "conda.yaml").write_text("dependencies: [python=3.10]\n")
    (repo / "stacks").mkdir()
    stack = repo / "stacks" / "s.yaml"
    stack.write_text("stack: repo\n" + WORKSPACE + "environments:\n  e: {image: \"x.azurecr.io/a:1\", "
                     "conda_file: ../shared/conda.yaml}\n")
    assert not [d for d in validate_files([stack]) if d.rule.startswith("paths.")]


def _context(project: Path, outside: Path) -> Path:
    ctx = project / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text("FROM ubuntu:22.04\nCOPY . /src\n")
    (ctx / "train.py").write_text("print('train')\n")
    (ctx / "ignored.txt").write_text("IGNORED-CONTENT\n")
    (ctx / ".amlignore").write_text("ignored.txt\n")
    (ctx / "key").symlink_to(Path("../..") / outside.name / ".ssh" / "id_rsa")  # a file link out
    (ctx / "out").symlink_to(outside)  # a directory link out
    (ctx / "loop").symlink_to(".")  # a directory link back in: endless to a walker that follows links
    return ctx


def test_apply_uploads_only_the_context_without_links_out_and_honours_amlignore(tmp_path, outside):
    project = tmp_path / "project"
    _context(project, outside)
    stack = project / "stack.yaml"
    stack.write_text("stack: ctx\n" + WORKSPACE + "environments:\n  built: {build: {path: ctx}}\n")
    state = tmp_path / "state"
    r = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", cwd=project,
              INFRA_LOCAL_DIR=str(state))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning[paths.context-skipped]" in r.stderr and "key -> ../../outside" in r.stderr
    uploaded = tree_text(state / "blobs")
    assert b"COPY . /src" in uploaded and b"print('train')" in uploaded  # the context did go up
    assert b"TOPSECRET" not in uploaded, "a symlink out of the build context was followed on upload"
    assert b"IGNORED-CONTENT" not in uploaded, ".amlignore must be honoured"


def test_render_copies_the_context_without_following_links_and_keeps_modes(tmp_path, outside):
    project = tmp_path / "project"
    ctx = _context(project, outside)
    (ctx / "deploy-key").write_text("PRIVATE\n")
    (ctx / "deploy-key").chmod(0o600)
    (project / "conda.yaml").write_text("dependencies: [python=3.10]\n")
    (project / "conda.yaml").chmod(0o640)
    stack = project / "stack.yaml"
    stack.write_text("stack: ctx\n" + WORKSPACE + "environments:\n  built: {build: {path: ctx}}\n"
                     "  img: {image: \"x.azurecr.io/a:1\", conda_file: conda.yaml}\n")
    out = tmp_path / "out"
    r = infra("render", str(stack), "--out", str(out), cwd=project, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    rendered = out / "environments" / "built" / "context"
    assert sorted(p.relative_to(rendered).as_posix() for p in rendered.rglob("*")) == [
        ".amlignore", "Dockerfile", "deploy-key", "train.py"]
    assert b"TOPSECRET" not in tree_text(out)
    assert stat.S_IMODE((rendered / "deploy-key").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "environments" / "img" / "conda.yaml").stat().st_mode) & 0o007 == 0


# ---- item 10: ${VAR} values are sensitive ---------------------------------------------------------------------

SECRET = "hf_TOPSECRET_8e31b6bb"
SECRET_STACK = "stack: sec\n" + WORKSPACE + """\
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 1}
environments:
  env: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  ddp:
    cluster: gpu
    environment: env
    type: pytorch
    process_count_per_instance: 2
    command: python train.py
    environment_variables:
      HF_TOKEN: ${HF_TOKEN}
      PLAIN_SETTING: "visible"
"""


def test_render_never_writes_an_interpolated_value(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(SECRET_STACK)
    out = tmp_path / "out"
    r = infra("render", str(stack), "--out", str(out), cwd=tmp_path, timeout=120, HF_TOKEN=SECRET)
    assert r.returncode == 0, r.stdout + r.stderr
    assert SECRET.encode() not in tree_text(out)
    for name in ("smoke-job.yml", "train-job.yml"):
        text = (out / "jobs" / "ddp" / name).read_text()
        assert '"HF_TOKEN": "${HF_TOKEN}"' in text and '"PLAIN_SETTING": "visible"' in text
        assert f'az ml job create -f {name} --set environment_variables.HF_TOKEN="$HF_TOKEN"' in text


def test_emulator_state_is_owner_only(tmp_path):
    server = start_emulator(tmp_path / "state")
    try:
        state = tmp_path / "state"
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        for f in state.glob("state.sqlite3*"):  # the database and its -wal/-shm files
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f.name
    finally:
        server.stop()


def test_smoke_uploads_no_interpolated_value_and_the_job_still_gets_it(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(SECRET_STACK.replace("process_count_per_instance: 2", "process_count_per_instance: 1"))
    state = tmp_path / "state"
    applied = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", cwd=tmp_path,
                    INFRA_LOCAL_DIR=str(state), HF_TOKEN=SECRET)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    plan = infra("plan", str(stack), "--local", "--json", cwd=tmp_path, INFRA_LOCAL_DIR=str(state), HF_TOKEN=SECRET)
    assert SECRET not in plan.stdout + plan.stderr
    r = infra("smoke", str(stack), "--local", cwd=tmp_path, INFRA_LOCAL_DIR=str(state), HF_TOKEN=SECRET)
    assert r.returncode == 0, r.stdout + r.stderr
    assert SECRET not in r.stdout + r.stderr
    uploaded = tree_text(state / "blobs")
    assert b'"HF_TOKEN": "${HF_TOKEN}"' in uploaded  # the job file went up, with the reference only
    assert SECRET.encode() not in uploaded
    # the job itself was submitted with the value (its spec is stored), and the store is owner-only
    import sqlite3

    with sqlite3.connect(state / "state.sqlite3") as db:
        bodies = [b for (b,) in db.execute("SELECT body FROM resources WHERE type = 'job'")]
    assert any(SECRET in b for b in bodies)
    assert stat.S_IMODE((state / "state.sqlite3").stat().st_mode) == 0o600


# ---- item 11: names and tags Azure rejects ----------------------------------------------------------------------

def test_names_azure_rejects_are_errors(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text("""\
stack: names
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: "rg/../../x",
            name: "../../../etc", location: eastus}
clusters:
  "gpu\\n": {size: Standard_ND96asr_v4, max_instances: 1}
environments:
  "env\\n": {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
""")
    found = diagnostics(stack)
    for rule in ("workspace.resource-group-name", "workspace.name", "cluster.name", "environment.name"):
        assert rule in found, (rule, sorted(found))
        (d,) = found[rule]
        assert d.severity == "error" and "learn.microsoft.com" in d.hint, d
    assert found["workspace.name"][0].line == 3 and found["cluster.name"][0].line == 5


def test_a_trailing_newline_in_a_resource_group_or_subscription_is_refused(tmp_path):
    # `$` in a regex matches before a final newline: the rules match whole names (re.fullmatch)
    stack = tmp_path / "stack.yaml"
    stack.write_text("stack: nl\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, "
                     "resource_group: \"rg-ok\\n\", name: mlw-ok, location: eastus}\n")
    # no text field holds a control character: the loader refuses the newline before the name rule reads it
    (found,) = validate_files([stack])
    assert found.rule == "stack.invalid" and "control characters" in found.message and found.line == 2, found
    stack.write_text("stack: nl\nworkspace: {subscription_id: \"00000000-0000-0000-0000-000000000000\\n\", "
                     "resource_group: rg-ok, name: mlw-ok, location: eastus}\n")
    (found,) = validate_files([stack])
    assert found.rule == "stack.invalid" and "control characters" in found.message and found.line == 2, found


def test_names_azure_accepts_pass(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text("stack: ok\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, "
                     "resource_group: \"rg.team(prod)_1\", name: ml_w-3, location: eastus}\n")
    assert validate_files([stack]) == []


def test_tag_limits(tmp_path):
    many = ", ".join(f"t{i}: v" for i in range(46))  # Azure allows 50, infra adds up to 5 of its own
    stack = tmp_path / "stack.yaml"
    stack.write_text("stack: tags\n" + WORKSPACE + f"""\
clusters:
  gpu:
    size: Standard_ND96asr_v4
    tags: {{{many}}}
  gpu2:
    size: Standard_ND96asr_v4
    tags: {{{'n' * 513}: v, "a/b": v, long: {'v' * 257}, infra.stack: mine, ok: {'v' * 256}}}
""")
    found = diagnostics(stack)
    (count,) = found["tags.count"]
    assert count.line == line_of(stack, "tags: {t0") and "46 tags" in count.message and "tag-resources" in count.hint
    assert len(found["tags.name"]) == 2 and len(found["tags.value"]) == 1 and len(found["tags.reserved"]) == 1
    assert all(d.severity == "error" for rule in ("tags.name", "tags.value") for d in found[rule])


def test_plans_show_interpolated_values_as_sensitive(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text("stack: sens\n" + WORKSPACE + """\
clusters:
  gpu:
    size: Standard_ND96asr_v4
    description: "owned by ${OWNER_EMAIL}"
    tags: {cost-center: "${COST_CODE}", team: ml}
""")
    env = dict(INFRA_LOCAL_DIR=str(tmp_path / "state"), OWNER_EMAIL="alice@corp-8e31b6bb", COST_CODE="CC-8e31b6bb")
    text = infra("plan", str(stack), "--local", cwd=tmp_path, **env)
    as_json = infra("plan", str(stack), "--local", "--json", cwd=tmp_path, **env)
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    assert "8e31b6bb" not in text.stdout + text.stderr + as_json.stdout + as_json.stderr
    assert 'description                 = (sensitive value)' in text.stdout
    assert '"cost-center": "(sensitive value)", "team": "ml"' in text.stdout  # only the interpolated tag
    import json

    (change,) = json.loads(as_json.stdout)["resource_changes"]
    assert change["change"]["after"]["description"] == "(sensitive value)"
    assert change["change"]["after"]["tags"] == {"cost-center": "(sensitive value)", "team": "ml"}


def test_the_emulator_refuses_a_name_with_a_trailing_newline(tmp_path):
    from infra_cli.emulator.wire import ArmError

    server = start_emulator(tmp_path / "state")
    try:
        server.backend.check_name("compute", "gpu-a")  # accepted
        for kind, name in (("compute", "gpu-a\n"), ("environment", "env\n"), ("job", "job-1\n")):
            with pytest.raises(ArmError) as exc:
                server.backend.check_name(kind, name)
            assert exc.value.code == "ValidationError", kind
    finally:
        server.stop()


def test_links_out_of_a_code_directory_are_named(tmp_path, outside):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("print('train')\n")
    (project / "src" / "key").symlink_to(outside / ".ssh" / "id_rsa")
    stack = project / "stack.yaml"
    stack.write_text("stack: code\n" + WORKSPACE + """\
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 1}
environments:
  env: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  d: {cluster: gpu, environment: env, type: pytorch, process_count_per_instance: 8, command: python train.py, code: src}
""")
    (d,) = diagnostics(stack)["paths.context-skipped"]
    assert d.severity == "warning" and d.line == line_of(stack, "  d: {") and "key -> " in d.message
