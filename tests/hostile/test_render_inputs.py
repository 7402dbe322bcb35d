"""`infra render` never harms what it reads (issue: security, third round): an --out that is, holds or lies inside
a source the stack reads is refused before anything is written; a link in the output folder is never written
through; a re-render removes the files the stack no longer has, and only files render itself wrote; a
`build.template` is a name, never a path, and every Jinja2 environment that sees the stack's values is sandboxed;
a training job's code is copied (as Azure ML uploads it) so the rendered folder can move.

Before: `render s.yaml --out .` emptied the stack's build context, a link at clusters/gpu.yml was written through,
clusters/gpu2.yml stayed after gpu2 was removed, `template: ../../x` rendered a Dockerfile.j2 from anywhere in an
unsandboxed Jinja2 (`{{ cycler.__init__.__globals__.os.system(...) }}` ran), and train-job.yml named its code as
`../../../project/src`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra_cli.diagnostics import DiagnosticError

# azure-ai-ml's schemas warn about marshmallow 4 on import; that is the SDK's business, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:.*:marshmallow.warnings.Marshmallow4Warning")

ROOT = Path(__file__).resolve().parents[2]
STACK = """\
stack: inputs
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
  gpu2: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  built: {build: {path: ctx}}
  img: {image: "x.azurecr.io/a:1", conda_file: conda.yaml}
  acpt: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  train:
    cluster: gpu
    environment: acpt
    code: src
    command: python train.py
    distribution: {type: pytorch, process_count_per_instance: 8}
    resources: {instance_count: 2}
"""


def infra(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "INFRA_DEBUG"}
    environ.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=environ)


@pytest.fixture
def project(tmp_path) -> Path:
    """A stack with a build context, a conda file and code (with an .amlignore), each with content to lose."""
    p = tmp_path / "project"
    (p / "ctx").mkdir(parents=True)
    (p / "ctx" / "Dockerfile").write_text("FROM ubuntu:22.04\nCOPY . /app\n")
    (p / "ctx" / "app.py").write_text("print('app')\n")
    (p / "conda.yaml").write_text("dependencies: [python=3.10]\n")
    (p / "src" / "pkg").mkdir(parents=True)
    (p / "src" / "train.py").write_text("import pkg.util\nprint('train')\n")
    (p / "src" / "pkg" / "util.py").write_text("X = 1\n")
    (p / "src" / "data").mkdir()
    (p / "src" / "data" / "big.bin").write_bytes(b"\0" * 1024)
    (p / "src" / "model.ckpt").write_bytes(b"weights")
    (p / "src" / ".amlignore").write_text("data/\n*.ckpt\n")
    (p / "stack.yaml").write_text(STACK)
    return p


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root: its kind, mode and content (or link target)."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[str(path)] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[str(path)] = ("dir", stat.S_IMODE(info.st_mode))
        else:
            found[str(path)] = ("file", stat.S_IMODE(info.st_mode), hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def line_of(stack: Path, text: str) -> int:
    return next(i for i, line in enumerate(stack.read_text().splitlines(), 1) if text in line)


# ---- an --out that is, holds or lies inside a source: refused, nothing written -----------------------------------

@pytest.mark.parametrize("out, relation, what", [
    (".", "contains", "the stack file"),           # the original report: ctx emptied, conda truncated
    ("ctx", "is", "the build context"),
    ("ctx/sub", "lies inside", "the build context"),
    ("src", "is", "the code folder"),
    ("src/pkg", "lies inside", "the code folder"),
    ("..", "contains", "the stack file"),
    ("conda.yaml", "is", "the conda file"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_an_out_over_a_source_is_refused_and_nothing_is_written(project, out, relation, what):
    before = snapshot(project.parent)
    r = infra("render", "stack.yaml", "--out", out, cwd=project)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert f"error[render.out-overlaps-input]: --out {out} {relation} {what}" in r.stderr, r.stderr
    assert "hint: render into a folder apart from what the stack reads, e.g. --out .infra/render/stack;" in r.stderr
    if what == "the build context":
        assert f"stack.yaml:{line_of(project / 'stack.yaml', 'built:')}:" in r.stderr  # at the line naming it
    assert snapshot(project.parent) == before, "render changed or created something while refusing"
    assert r.stdout == ""


def test_an_out_that_is_a_link_to_a_source_is_refused(project, tmp_path):
    (tmp_path / "out").symlink_to(project / "ctx")
    before = snapshot(tmp_path)
    r = infra("render", str(project / "stack.yaml"), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 1 and "is the build context" in r.stderr, r.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("code, suggested", [("src", ".infra/render/stack"), (".", "../stack-rendered")])
def test_the_suggested_out_works_when_pasted(project, code, suggested):
    """The hint's folder, pasted as it is, renders: under the project's .infra/ (which a checkout ignores, as
    `--local`'s state there; issue 34 walk: `stacks/rendered` was left untracked in the user's checkout), else
    beside the project when a `code:` folder is the whole project."""
    (project / "stack.yaml").write_text(STACK.replace("code: src", f"code: {code}"))
    refused = infra("render", "stack.yaml", "--out", "ctx", cwd=project)
    pasted = re.search(r"e\.g\. --out (\S+);", refused.stderr).group(1)
    assert pasted == suggested, refused.stderr
    r = infra("render", "stack.yaml", "--out", pasted, cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / pasted / "clusters" / "gpu.yml").is_file()


# ---- links in the output folder ------------------------------------------------------------------------------

def test_a_link_at_a_files_place_is_replaced_never_written_through(project, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    (out / "clusters").mkdir(parents=True)
    (out / "clusters" / "gpu.yml").symlink_to(victim)
    (out / "environments" / "img").mkdir(parents=True)
    (out / "environments" / "img" / "conda.yaml").symlink_to(victim)  # a copied file's place too
    r = infra("render", str(project / "stack.yaml"), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n"
    for place in (out / "clusters" / "gpu.yml", out / "environments" / "img" / "conda.yaml"):
        assert not place.is_symlink() and place.is_file()
    assert "amlcompute" in (out / "clusters" / "gpu.yml").read_text()


@pytest.mark.parametrize("linked", ["environments", "jobs/train", "code"])
def test_a_link_on_the_way_is_refused_before_anything_is_written(project, tmp_path, linked):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine\n")
    out = tmp_path / "out"
    (out / linked).parent.mkdir(parents=True, exist_ok=True)
    (out / linked).symlink_to(victim, target_is_directory=True)
    before = snapshot(tmp_path)
    r = infra("render", str(project / "stack.yaml"), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert f"error[render.output-link]: {out / linked} is a symbolic link" in r.stderr, r.stderr
    assert snapshot(tmp_path) == before


def test_a_manifest_that_is_a_link_is_neither_read_nor_written_through(project, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"format_version": 1, "files": {}}))
    out = tmp_path / "out"
    out.mkdir()
    (out / ".infra-render.json").symlink_to(elsewhere)
    r = infra("render", str(project / "stack.yaml"), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(elsewhere.read_text()) == {"format_version": 1, "files": {}}
    assert not (out / ".infra-render.json").is_symlink()


# ---- the manifest: stale files removed, only files render wrote ---------------------------------------------

def test_a_removed_resource_leaves_no_stale_file_and_nothing_else_is_removed(project, tmp_path):
    out = tmp_path / "out"
    assert infra("render", str(project / "stack.yaml"), "--out", str(out), cwd=tmp_path).returncode == 0
    manifest = json.loads((out / ".infra-render.json").read_text())
    assert manifest["format_version"] == 2 and "clusters/gpu2.yml" in manifest["stacks"]["inputs"]["files"]
    for relative, entry in manifest["stacks"]["inputs"]["files"].items():
        assert hashlib.sha256((out / relative).read_bytes()).hexdigest() == entry["sha256"]
    (out / "clusters" / "mine.yml").write_text("a file render did not write\n")
    (out / "README.txt").write_text("notes\n")
    stack = project / "stack.yaml"
    # gpu2 and the built environment go; built's file was edited by hand since
    stack.write_text(STACK.replace("  gpu2: {size: Standard_ND96asr_v4, max_instances: 2}\n", "")
                     .replace("  built: {build: {path: ctx}}\n", ""))
    with open(out / "environments" / "built.yml", "a") as fh:
        fh.write("# edited by hand\n")
    r = infra("render", str(stack), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (out / "clusters" / "gpu2.yml").exists()
    assert f"info[render.removed]: removed {out / 'clusters' / 'gpu2.yml'}" in r.stderr
    assert not (out / "environments" / "built").exists()  # its context file removed, the emptied folders too
    assert (out / "environments" / "built.yml").read_text().endswith("# edited by hand\n")
    assert "warning[render.stale-kept]" in r.stderr
    assert (out / "clusters" / "mine.yml").is_file() and (out / "README.txt").is_file()
    assert (out / "clusters" / "gpu.yml").is_file()
    files = json.loads((out / ".infra-render.json").read_text())["stacks"]["inputs"]["files"]
    assert "clusters/gpu2.yml" not in files and "environments/built.yml" not in files


def test_a_forged_manifest_cannot_remove_anything_outside_the_output_folder(project, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    sha = hashlib.sha256(victim.read_bytes()).hexdigest()
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "via").symlink_to(tmp_path, target_is_directory=True)
    (out / ".infra-render.json").write_text(json.dumps({"format_version": 1, "files": {
        "../victim.txt": sha, str(victim): sha, "sub/../../victim.txt": sha, "via/victim.txt": sha}}))
    r = infra("render", str(project / "stack.yaml"), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n"


def test_a_malformed_manifest_removes_nothing_and_says_so(project, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".infra-render.json").write_text("[not a manifest")
    r = infra("render", str(project / "stack.yaml"), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0 and "warning[render.manifest-unreadable]" in r.stderr, r.stderr
    assert json.loads((out / ".infra-render.json").read_text())["format_version"] == 2


# ---- templates are names; Jinja2 is sandboxed ---------------------------------------------------------------

EVIL_TEMPLATE = "FROM ubuntu:22.04\n{{ cycler.__init__.__globals__.os.system('touch MARKER') }}\n"


@pytest.fixture
def evil_template(tmp_path) -> Path:
    """A template folder outside templates/docker that claims Open MPI and runs a command when rendered."""
    d = tmp_path / "evil"
    d.mkdir()
    (d / "Dockerfile.j2").write_text(EVIL_TEMPLATE.replace("MARKER", str(tmp_path / "PWNED")))
    (d / "template.yaml").write_text("provides: [openmpi]\nparameters: {}\n")
    return d


@pytest.mark.parametrize("name", ["../../evil", "EVIL", "/abs/evil", "openmpi-rdma/", "openmpi-rdma/../x", "-x", ".."])
def test_a_template_path_is_refused_at_its_line(tmp_path, evil_template, name):
    project = tmp_path / "p" / "q"
    project.mkdir(parents=True)
    stack = project / "stack.yaml"
    stack.write_text(STACK.split("environments:")[0] + f"environments:\n  mpi: {{build: {{template: {json.dumps(name)}}}}}\n")
    for command in (["validate"], ["render", "--out", str(tmp_path / "out")]):
        r = infra(*command[:1], str(stack), *command[1:], cwd=project)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "Traceback" not in r.stderr
        assert f"stack.yaml:{line_of(stack, 'template')}:" in r.stderr
        assert "error[environment.template-name]" in r.stderr and "not a path" in r.stderr, r.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "out").exists()


def test_a_template_folder_that_links_out_of_templates_docker_is_refused(tmp_path, evil_template, monkeypatch):
    from infra_cli.knowledge.docker_templates import template_dir, template_meta
    from infra_cli.validate.rules.carries import build_template_provides

    templates = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", templates)
    (templates / "docker" / "evil").symlink_to(evil_template, target_is_directory=True)
    monkeypatch.setenv("INFRA_TEMPLATES_DIR", str(templates))
    with pytest.raises(DiagnosticError) as exc:
        template_dir("evil")
    assert "leads out of templates/docker" in exc.value.diagnostics[0].message
    assert template_meta("evil") is None and build_template_provides("evil") is None  # its provides: never read
    assert build_template_provides("openmpi-rdma")  # a real one still is


def test_the_dockerfile_sandbox_refuses_globals(tmp_path, monkeypatch):
    """A template that reaches for Python's internals is refused; the command it tried never runs."""
    from infra_cli.image.dockerfile import render_dockerfile

    templates = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", templates)
    source = templates / "docker" / "openmpi-rdma" / "Dockerfile.j2"
    source.write_text(source.read_text() + EVIL_TEMPLATE.split("\n", 1)[1].replace("MARKER", str(tmp_path / "PWNED")))
    monkeypatch.setenv("INFRA_TEMPLATES_DIR", str(templates))
    with pytest.raises(DiagnosticError) as exc:
        render_dockerfile("openmpi-rdma", {})
    d = exc.value.diagnostics[0]
    assert d.rule == "build.template" and "SecurityError" in d.message and d.file == str(source)
    assert not (tmp_path / "PWNED").exists()
    # and through the command line: a diagnostic, never a traceback, nothing written
    project = tmp_path / "project"
    project.mkdir()
    stack = project / "stack.yaml"
    stack.write_text(STACK.split("environments:")[0] + "environments:\n  mpi: {build: {template: openmpi-rdma}}\n")
    r = infra("render", str(stack), "--out", str(tmp_path / "out"), cwd=project, INFRA_TEMPLATES_DIR=str(templates))
    assert r.returncode == 1 and "error[build.template]" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "out").exists()


def test_the_job_templates_sandbox_refuses_globals():
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import SandboxedEnvironment

    from infra_cli.paths import templates_dir
    from infra_cli.smoke.job_templates import _jinja

    env = _jinja(str(templates_dir() / "smoke"))
    assert isinstance(env, SandboxedEnvironment)
    with pytest.raises(SecurityError):
        env.from_string("{{ cycler.__init__.__globals__ }}").render()


def test_every_jinja2_environment_in_infra_cli_is_sandboxed():
    """Found as `grep -rn "Environment(" infra_cli` finds them: none is jinja2's unsandboxed Environment."""
    unsandboxed = re.compile(r"\bjinja2\.(?:environment\.)?Environment\(|from jinja2(?:\.environment)? import [^\n]*\bEnvironment\b")
    offenders = [f"{path.relative_to(ROOT)}: {m.group(0)}" for path in sorted((ROOT / "infra_cli").rglob("*.py"))
                 for m in unsandboxed.finditer(path.read_text(encoding="utf-8"))]
    assert any("SandboxedEnvironment(" in p.read_text() for p in (ROOT / "infra_cli").rglob("*.py"))
    assert not offenders, offenders


# ---- code copied: the rendered folder can move -----------------------------------------------------------------

def test_code_is_copied_as_azure_ml_uploads_it_and_the_moved_folder_loads(project, tmp_path):
    from azure.ai.ml import load_job

    out = tmp_path / "out"
    r = infra("render", str(project / "stack.yaml"), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load((out / "jobs" / "train" / "train-job.yml").read_text())
    assert doc["code"] == "../../code/train"   # relative, inside the output folder
    copied = out / "code" / "train"
    assert sorted(p.relative_to(copied).as_posix() for p in copied.rglob("*") if p.is_file()) == [
        ".amlignore", "pkg/util.py", "train.py"]   # data/ and *.ckpt left out, as .amlignore says
    # moved (a CI artifact), with the project gone: the job still loads and its code is the copy
    moved = tmp_path / "elsewhere" / "artifact"
    moved.parent.mkdir()
    shutil.move(str(out), moved)
    shutil.rmtree(project)
    job = load_job(moved / "jobs" / "train" / "train-job.yml")
    code = Path(job.code)
    code = code if code.is_absolute() else (moved / "jobs" / "train" / code)
    assert code.resolve() == (moved / "code" / "train").resolve()
    assert (code / "train.py").read_text() == "import pkg.util\nprint('train')\n"


def test_code_shared_by_two_distributions_is_copied_once(project, tmp_path):
    from infra_cli.apply.files import render_stack

    stack = project / "stack.yaml"
    stack.write_text(STACK + """\
  train2:
    cluster: gpu
    environment: acpt
    code: src
    command: python train.py --again
    distribution: {type: pytorch, process_count_per_instance: 8}
    resources: {instance_count: 2}
""")
    written, _ = render_stack(stack, tmp_path / "out")
    second = yaml.safe_load((tmp_path / "out" / "jobs" / "train2" / "train-job.yml").read_text())
    assert second["code"] == "../../code/train"
    assert not (tmp_path / "out" / "code" / "train2").exists()
    assert len([p for p in written if p.name == "train.py"]) == 1
