"""infra as it ships: the wheel and the sdist carry everything infra reads at run time (validators/, templates/,
the emulator's world), and the installed package, used from a folder outside the checkout through the venv's
full path (not activated), behaves as the checkout does.

Each test fails on a wheel that carries only infra_cli/*.py (the packaging before pyproject.toml mapped the data):
validate, schema, skus, render, plan and image check then cannot read their catalog or templates.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from image_fixtures import images, registry  # noqa: F401 (fixtures)
from installed_fixtures import ROOT, Installed, installed, pip_install_into, make_venv, wheel_names  # noqa: F401

SHIPPED_DATA = sorted(str(p.relative_to(ROOT)) for folder in ("validators", "templates")
                      for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
STACKS = sorted(p.name for p in (ROOT / "stacks").glob("*.yaml"))


def _project(tmp_path: Path) -> Path:
    """A user's project outside the checkout: the shipped stacks and what they name (code folders)."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "stacks", project / "stacks", ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _checkout(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The same command from the checkout, as the suite runs every other test."""
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_distributions_carry_everything_infra_reads(installed: Installed, tmp_path):
    assert installed.wheel and installed.sdist, f"no wheel and sdist beside {installed.venv}"
    names = wheel_names(installed.wheel)
    expected = {f"infra_cli/_shipped/{name}" for name in SHIPPED_DATA} | {"infra_cli/emulator/world.yaml"}
    assert expected <= names, sorted(expected - names)
    packages = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in (ROOT / "infra_cli").rglob("__init__.py")}
    assert {f"{p.replace('.', '/')}/__init__.py" for p in packages} <= names   # pyproject.toml lists every package
    with tarfile.open(installed.sdist) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        in_sdist = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
        assert set(SHIPPED_DATA) <= in_sdist, sorted(set(SHIPPED_DATA) - in_sdist)
        sdist.extractall(tmp_path, filter="data")
    # pip builds the wheel from the sdist when no wheel fits: it must carry the same files
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                           str(tmp_path / "from-sdist"), str(tmp_path / top)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    from_sdist = wheel_names(next((tmp_path / "from-sdist").glob("*.whl")))
    strip = re.compile(r"^infra_cli-[^/]+\.dist-info/")
    assert {n for n in from_sdist if not strip.match(n)} == {n for n in names if not strip.match(n)}


def test_the_installed_package_is_not_the_checkout(installed: Installed, tmp_path):
    done = subprocess.run([str(installed.bin / "python"), "-c", "import infra_cli, importlib.metadata as m; "
                           "print(infra_cli.__file__); print(m.version('infra-cli'))"], cwd=tmp_path,
                          env=installed.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    module, version = done.stdout.split()
    assert Path(module).resolve().is_relative_to(installed.venv.resolve()), module
    said = installed.infra("--version", cwd=tmp_path)
    assert said.returncode == 0 and said.stdout.strip() == f"infra v{version}", said.stdout + said.stderr
    assert installed.infra("-version", cwd=tmp_path).stdout == said.stdout


def _without_paths(text: str, *folders: Path) -> str:
    for folder in folders:
        text = text.replace(str(folder), "<STACKS>")
    return text


@pytest.mark.parametrize("stack", STACKS)
def test_validate_says_what_the_checkout_says(installed: Installed, tmp_path, stack):
    project = _project(tmp_path)
    got = installed.infra("validate", "--json", f"stacks/{stack}", cwd=project)
    want = _checkout("validate", "--json", f"stacks/{stack}", cwd=ROOT)
    assert (got.returncode, json.loads(got.stdout)) == (want.returncode, json.loads(want.stdout)), got.stderr


def test_schema_and_the_sku_catalog_are_the_checkouts(installed: Installed, tmp_path):
    for command in (["schema"], ["skus", "--json"], ["skus", "--infiniband", "--json"]):
        got, want = installed.infra(*command, cwd=tmp_path), _checkout(*command, cwd=tmp_path)
        assert got.returncode == want.returncode == 0, (command, got.stderr)
        assert json.loads(got.stdout) == json.loads(want.stdout), command
    assert json.loads(got.stdout), "an empty catalog"


def test_render_plan_apply_and_destroy_from_outside_the_checkout(installed: Installed, tmp_path):
    project = _project(tmp_path)
    rendered = installed.infra("render", "stacks/mpi-deepspeed.yaml", "--out", str(tmp_path / "out"), cwd=project)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    dockerfiles = list((tmp_path / "out").rglob("Dockerfile"))
    assert dockerfiles and "FROM " in dockerfiles[0].read_text()   # the template shipped in the wheel
    assert list((tmp_path / "out").rglob("*.yml"))
    stack = "stacks/ib-a100.yaml"
    plan = installed.infra("plan", stack, "--local", cwd=project)
    assert plan.returncode == 0 and "cluster.a100 will be created" in plan.stdout, plan.stdout + plan.stderr
    apply = installed.infra("apply", stack, "--local", "--auto-approve", "--no-smoke", cwd=project)
    assert apply.returncode == 0 and "Apply complete! Resources: 1 added" in apply.stdout, apply.stdout + apply.stderr
    # the local cloud is the project's (the stack's folder here: no .git or .infra above it), from any folder
    listed = installed.infra("state", "list", "ib-a100.yaml", "--local", cwd=project / "stacks")
    assert listed.returncode == 0 and "cluster.a100" in listed.stdout.split(), listed.stdout + listed.stderr
    destroyed = installed.infra("destroy", stack, "--local", "--auto-approve", cwd=project)
    assert destroyed.returncode == 0 and "1 destroyed" in destroyed.stdout, destroyed.stdout + destroyed.stderr


def test_image_check_reads_the_evidence_it_ships(installed: Installed, images, tmp_path):
    met = installed.infra("image", "check", images.refs["openmpi"], "--require", "openmpi>=4.1", cwd=tmp_path)
    assert met.returncode == 0, met.stdout + met.stderr
    assert "PASS  openmpi>=4.1" in met.stdout
    unmet = installed.infra("image", "check", images.refs["mpich"], cwd=tmp_path)
    assert unmet.returncode == 1 and "FAIL  openmpi" in unmet.stdout, unmet.stdout + unmet.stderr


@pytest.mark.runs_jobs
@pytest.mark.system_tools("mpirun")
def test_an_unactivated_venv_runs_the_smoke_of_an_mpi_per_node_stack(installed: Installed, tmp_path):
    """venv/bin/infra with nothing of the venv on PATH: the emulator's jobs run in infra's own environment, whose
    torchrun (the per-node launcher) lives in the venv's bin/ (or the base's, for a --system-site-packages venv;
    make_venv links the suite's own)."""
    pytest.importorskip("torch")
    project = _project(tmp_path)
    done = installed.infra("apply", "stacks/mpi-per-node.yaml", "--local", "--auto-approve", cwd=project, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"smoke\.\S+: PASSED", done.stdout), done.stdout[-3000:]
    assert "not found in the job's PATH" not in done.stdout
