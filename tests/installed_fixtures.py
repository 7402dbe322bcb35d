"""infra as users install it: distributions built from the tracked files, a wheel installed non-editable in a
virtual environment, commands run by the venv's full path (not activated) from folders outside the checkout.

INFRA_INSTALLED_VENV names a venv made the way a user makes one (.ci/run: a fresh venv, the lock, the wheel
that `python -m build` made from the sdist, both in dist/ beside the venv);
without it, the wheel is built here and installed, with no dependency resolved, into a venv that sees this
interpreter's packages (make_venv: the suite's own venv's where it runs in one), so the suite needs no download.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALLED_VENV_ENV = "INFRA_INSTALLED_VENV"
# no venv bin/ and no pyenv shims: what a CI step or cron job that calls venv/bin/infra has
BARE_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if Path(p).is_dir())
_JUNK = {".git", ".infra", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}


def tracked_tree(destination: Path) -> Path:
    """A copy of the files git tracks (what a clean clone or the action's checkout holds), in `destination`.
    Outside git (an unpacked sdist), everything but build and cache folders."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True)
    names = [n for n in listed.stdout.decode().split("\0") if n] if listed.returncode == 0 else []
    if names:
        for name in names:
            source = ROOT / name
            if source.is_file():
                target = destination / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    else:
        shutil.copytree(ROOT, destination, ignore=lambda _d, names: [n for n in names if n in _JUNK or
                                                                       n.endswith(".egg-info")], dirs_exist_ok=True)
    return destination


def build_distributions(source: Path, out: Path) -> tuple[Path, Path]:
    """The wheel and the sdist of `source`, through setuptools' PEP 517 hooks (what pip and `python -m build`
    call), with this interpreter's setuptools: no download."""
    out.mkdir(parents=True, exist_ok=True)
    names = out / "built.txt"   # the hooks' answers (setuptools prints its own progress on stdout)
    hooks = ("import sys, pathlib; from setuptools import build_meta as b; out, names = sys.argv[1:3]; "  # (the hooks
             "pathlib.Path(names).write_text(b.build_wheel(out) + ' ' + b.build_sdist(out))")       # rewrite sys.argv)
    done = subprocess.run([sys.executable, "-c", hooks, str(out), str(names)], cwd=source, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel_name, sdist_name = names.read_text().split()
    return out / wheel_name, out / sdist_name


def make_venv(path: Path, *, see_suite_packages: bool = True) -> Path:
    """A fresh venv; with `see_suite_packages`, one that also sees the packages of the interpreter running the
    suite. Not `--system-site-packages`: made from a venv's Python, that sees the BASE interpreter's packages, not
    the venv's (the README's quick-start venv lacked typer there). A .pth file of plain paths adds this
    interpreter's site-packages after the new venv's own, so what is installed into the new venv (the wheel) wins
    and this interpreter's .pth hooks (an editable install of the checkout) are not run there."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    if see_suite_packages:
        [own] = path.glob("lib/python*/site-packages")
        suite = [p for p in dict.fromkeys(sys.path) if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
        (own / "zz_infra_suite_packages.pth").write_text("".join(f"{p}\n" for p in suite))
        # and their console scripts (torchrun: the emulator's per-node launcher), linked, never `infra` itself,
        # which the wheel installed next must write as its own file
        scripts, bin_ = Path(sysconfig.get_path("scripts")), path / "bin"
        for script in scripts.iterdir() if scripts.resolve() != bin_.resolve() else ():
            if not (bin_ / script.name).exists() and script.name != "infra" and not script.name.startswith(
                    ("python", "activate", "Activate", "pip")):
                (bin_ / script.name).symlink_to(script)
    return path


def pip_install_into(venv: Path, *args: str) -> None:
    """pip, this interpreter's, installing into `venv` (its --python option): the venv needs no pip of its own."""
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                           "--disable-pip-version-check", *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@dataclass
class Installed:
    venv: Path
    wheel: Path | None   # None: a venv made outside the suite without dist/ beside it
    sdist: Path | None

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a command run by its full path: the venv not activated, no INFRA_* of the suite's."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("INFRA_", "VIRTUAL_ENV", "PYTHON"))}
        env["PATH"] = BARE_PATH
        env.update(extra)
        return env

    def infra(self, *args: str, cwd: Path, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / "infra"), *args], cwd=cwd, env=self.env(**extra), capture_output=True,
                              text=True, timeout=timeout)


def install_wheel(tmp: Path) -> Installed:
    wheel, sdist = build_distributions(tracked_tree(tmp / "src"), tmp / "dist")
    venv = make_venv(tmp / "venv")
    pip_install_into(venv, "--no-deps", "--no-index", str(wheel))
    return Installed(venv, wheel, sdist)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    given = os.environ.get(INSTALLED_VENV_ENV)
    if given:   # .ci/run's venv, and the distributions it installed from (beside it, in dist/)
        dist = Path(given).parent / "dist"
        wheels, sdists = sorted(dist.glob("infra_cli-*.whl")), sorted(dist.glob("infra_cli-*.tar.gz"))
        return Installed(Path(given), wheels[0] if wheels else None, sdists[0] if sdists else None)
    return install_wheel(tmp_path_factory.mktemp("installed"))


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())
