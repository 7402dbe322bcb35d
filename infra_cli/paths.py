"""Where the project's data lives: the knowledge in validators/ and the Jinja2 templates in templates/.

Both sit at the top of the repository (the design card fixes the layout). A built wheel or sdist carries them
inside the package, as infra_cli/_shipped/validators and infra_cli/_shipped/templates (package data mapped from
the top-level folders by pyproject.toml); a checkout (editable install, or run in place) reads the top-level
folders themselves. INFRA_VALIDATORS_DIR and INFRA_TEMPLATES_DIR point elsewhere, e.g. at a user's extended
catalog.

The local state's folders are here too (`--local`'s cloud, the user's own state) and the stack's project. What a
build context uploads is infra_cli/build_context.py; the local state's trust and writes infra_cli/private_state.py;
files read and written below a folder through no link infra_cli/safe_files.py.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
SHIPPED = "_shipped"   # the package-data folder of an installed distribution (pyproject.toml's package-dir)


@functools.lru_cache(maxsize=None)
def shipped_data_dir(name: str) -> Path:
    """validators/ or templates/ as this installation has them: inside the installed package, else the checkout's
    top-level folder (a checkout holds pyproject.toml beside the package; site-packages does not, and a
    `validators` folder there is the PyPI package of that name, never infra's catalog)."""
    # a path beside this module rather than importlib.resources (its import costs every command ~8 ms): a wheel
    # installs onto the file system, and Jinja2's loader and the catalog readers need real paths anyway
    installed = PACKAGE_DIR / SHIPPED / name
    if installed.is_dir():
        return installed
    return PROJECT_ROOT / name if (PROJECT_ROOT / "pyproject.toml").is_file() else installed


def validators_dir() -> Path:
    return Path(os.environ.get("INFRA_VALIDATORS_DIR") or shipped_data_dir("validators"))


def templates_dir() -> Path:
    return Path(os.environ.get("INFRA_TEMPLATES_DIR") or shipped_data_dir("templates"))


LOCAL_STATE_MARKERS = (".infra", ".git")   # what makes a folder a project for `--local`'s cloud


def local_project(anchor: Path | None = None) -> Path:
    """The project whose local cloud `--local` uses: the nearest folder at or above the stack's own folder (or the
    current directory, without a stack) that holds `.infra/` or `.git`, else that folder itself. So
    `infra plan stacks/x.yaml` from the repository root and `infra plan x.yaml` from stacks/ see one cloud."""
    start = Path.cwd() if anchor is None else Path(anchor).absolute()
    if anchor is not None and not start.is_dir():
        start = start.parent
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in LOCAL_STATE_MARKERS):
            return directory
    return start


def local_state_dir(anchor: Path | None = None) -> Path:
    """Where `--local` keeps the emulated cloud: INFRA_LOCAL_DIR, else the project's .infra/local (local_project;
    see README "Local Azure")."""
    explicit = os.environ.get("INFRA_LOCAL_DIR")
    return Path(explicit) if explicit else local_project(anchor) / ".infra" / "local"


def user_state_dir() -> Path:
    """What infra keeps for the user rather than for a project (render's manifest key): $XDG_STATE_HOME/infra,
    else ~/.local/state/infra (https://specifications.freedesktop.org/basedir-spec/latest/)."""
    base = os.environ.get("XDG_STATE_HOME")
    if not base or not Path(base).is_absolute():   # a relative XDG_STATE_HOME is invalid by the spec
        base = str(Path.home() / ".local" / "state")
    return Path(base) / "infra"


def project_root(stack_file: Path) -> Path:
    """The git work tree holding the stack file (a `.git` directory or file), else the stack's directory."""
    start = Path(stack_file).resolve().parent
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def inside(path: Path, root: Path) -> bool:
    """Whether `path`, with every symlink resolved, lies in `root` (resolved)."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except ValueError:   # a NUL in the path (a Dockerfile's COPY source, say): no file has that name, anywhere
        return False
