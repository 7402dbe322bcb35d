"""The Debian packages some tests need, in one table, and the one way a test says it needs them.

A test (or a fixture) that runs a program from a Debian package calls `require("mpirun")`, or carries
`@pytest.mark.system_tools("mpirun", ...)` (conftest.py applies the mark before the test runs). Where a program is
missing, the test is skipped with the `apt-get install` that brings it, so the README's test command on a machine
without those packages ends in skips that say what to install, not in failures. CI (`.ci/run`), which installs them
all, sets INFRA_REQUIRE_SYSTEM_TOOLS=1: there a missing program fails the test instead, so a package dropped
from .ci/run's apt-get line cannot turn into a silent skip.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE_ENV = "INFRA_REQUIRE_SYSTEM_TOOLS"

# program -> the Debian package that installs it (https://packages.debian.org/bookworm/)
PACKAGES = {
    "mpirun": "openmpi-bin",
    "skopeo": "skopeo",
    "umoci": "umoci",
    "docker-registry": "docker-registry",
    "buildah": "buildah",
    "mmdebstrap": "mmdebstrap",
    "dot": "graphviz",
    "chromium": "chromium",
    "apt-get": "apt",
    "dpkg-deb": "dpkg",
}

# what the real registry and its images are made with (tests/image_fixtures.py)
IMAGE_TOOLS = ("skopeo", "umoci", "docker-registry", "apt-get", "dpkg-deb")


def missing(*programs: str) -> list[str]:
    unknown = [p for p in programs if p not in PACKAGES]
    assert not unknown, f"tests/system_tools.py: add {unknown} to PACKAGES with the Debian package that has it"
    return [p for p in programs if shutil.which(p) is None]


def install_hint(programs: list[str]) -> str:
    packages = " ".join(dict.fromkeys(PACKAGES[p] for p in programs))
    return f"needs {', '.join(programs)}: apt-get install {packages}"


def require(*programs: str) -> None:
    """Skip (fail under INFRA_REQUIRE_SYSTEM_TOOLS=1) unless every program is on PATH."""
    absent = missing(*programs)
    if not absent:
        return
    hint = install_hint(absent)
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but this test {hint}")
    pytest.skip(hint)
