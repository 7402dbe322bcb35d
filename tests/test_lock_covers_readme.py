"""Every tool the README has a quick-start user run is pinned in requirements.lock (issue 43: `python -m build`, which
the README names for the sdist and wheel, was not, and failed with "No module named build" in the quick-start venv)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# what the README has a user type -> the package that must be in the quick-start venv for it to run
README_TOOLS = {
    "python -m build": "build",
    "python3 -m pytest -q -n 3 --dist loadgroup": "pytest-xdist",
    "`ruff check .`": "ruff",
    "`mypy`": "mypy",
    "pre-commit": "pre-commit",
}


def pinned(lock: Path) -> set[str]:
    """The package names a pip-compile lock pins (`name==version \\`), normalised as PEP 503 does."""
    names = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", lock.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[-_.]+", "-", n).lower() for n in names}


def missing_from(lock: Path) -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    have = pinned(lock)
    return [f"{package} (for {said})" for said, package in README_TOOLS.items() if said in readme and package not in have]


def test_the_readme_still_names_each_tool():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [said for said in README_TOOLS if said not in readme] == []


def test_every_tool_the_readme_runs_is_in_the_lock():
    assert missing_from(ROOT / "requirements.lock") == []


def test_a_lock_without_build_is_caught(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text(re.sub(r"^build==.*\n(    --hash=.*\n)*", "", (ROOT / "requirements.lock").read_text(), flags=re.M))
    assert missing_from(lock) == ["build (for python -m build)"]
