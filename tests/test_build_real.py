"""The openmpi-rdma template's rendered Dockerfile, built for real: buildah (daemonless, vfs storage, chroot
isolation) FROM a Debian bookworm base built here from Debian's packages (mmdebstrap), with the base pushed to
the test's 127.0.0.1 registry; the RUN steps install from deb.debian.org. The offline check (validate/
build_steps.py) accepts the same file, and `infra image check` finds Open MPI and verbs in the built image.

The base image (apt and Python) and apt's downloads are cached in the tests' cache (INFRA_TEST_CACHE), as the
image tests cache their .deb files. Skipped, with the reason, where buildah or mmdebstrap cannot run or
deb.debian.org cannot be reached. Reproduce by hand: README "Custom images".
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from image_fixtures import CACHE, build_oci, registry  # noqa: F401  (registry: the session's fixture)
from system_tools import require
from infra_cli.image.dockerfile import render_dockerfile
from infra_cli.knowledge.base_images import build_knowledge
from infra_cli.validate.build_steps import build_step_problems

pytestmark = pytest.mark.runs_jobs   # minutes of downloads and a build: scheduled first (tests/conftest.py)
ROOT = Path(__file__).resolve().parent.parent
MIRROR = "http://deb.debian.org/debian"
# The base: Debian's apt variant (essential packages and apt) with Python, as a Python base image has it; the build
# installs the template's own packages (rdma-core, pip, Open MPI) from deb.debian.org.
BASE_PACKAGES = ["python3"]
REQUIRE_BUILD_ENV = "INFRA_REQUIRE_REAL_BUILD"


def _cannot_build(reason: str) -> None:
    """Skip for a reason of this machine's, but fail where CI promised a real build (INFRA_REQUIRE_REAL_BUILD=1,
    set by .ci/run): there a build that cannot run is a broken CI, not a skip nobody reads."""
    if os.environ.get(REQUIRE_BUILD_ENV) == "1":
        pytest.fail(f"{REQUIRE_BUILD_ENV}=1 but the real build cannot run: {reason}")
    pytest.skip(reason)


def _require_build_host() -> None:
    require("buildah", "mmdebstrap", "umoci", "skopeo", "docker-registry")
    if os.geteuid() != 0:
        _cannot_build("buildah's chroot isolation and mmdebstrap's root mode need root here")
    try:
        socket.create_connection(("deb.debian.org", 80), timeout=5).close()
    except OSError as exc:
        _cannot_build(f"deb.debian.org cannot be reached ({exc}): the build installs Debian packages")


def _base_image() -> str:
    """Debian bookworm with apt and BASE_PACKAGES (mmdebstrap), as an OCI layout built by umoci: `oci:DIR:base`,
    built once per package list."""
    key = hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:12]
    layout = CACHE / f"bookworm-base-{key}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".bookworm-base.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (layout / "index.json").exists():
            shutil.rmtree(layout, ignore_errors=True)
            tar = CACHE / f"bookworm-base-{key}.tar"   # kept until the layout is made: a rerun starts from it
            if not tar.exists():
                unfinished = tar.with_name("unfinished-" + tar.name)
                done = subprocess.run(
                    ["mmdebstrap", "--variant=apt", "--mode=root", "--format=tar", "--dpkgopt=force-unsafe-io",
                     "--aptopt=Acquire::Languages \"none\"", f"--include={','.join(BASE_PACKAGES)}", "bookworm",
                     str(unfinished), MIRROR], capture_output=True, text=True, timeout=900)
                if done.returncode != 0:
                    _cannot_build(f"mmdebstrap could not build the base: {done.stderr.strip()[-500:]}")
                unfinished.rename(tar)
            partial = layout.with_name(layout.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            build_oci(partial, "base", [tar])
            tar.unlink()
            partial.rename(layout)
    return f"oci:{layout}:base"


def test_the_rendered_dockerfile_builds_with_buildah_and_carries_open_mpi(tmp_path, registry):  # noqa: F811
    _require_build_host()
    base = registry.push(_base_image(), "base/debian:bookworm", "--format", "oci")
    dockerfile = render_dockerfile("openmpi-rdma", {"base_image": base})
    # the offline check agrees: a Debian base provides apt only, and every step installs what the next needs
    assert build_step_problems(dockerfile, base=build_knowledge().base("debian:bookworm")) == []
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text(dockerfile)
    apt_cache = CACHE / "apt-archives"
    (apt_cache / "partial").mkdir(parents=True, exist_ok=True)
    storage = ["--root", str(tmp_path / "storage"), "--runroot", str(tmp_path / "run"), "--storage-driver", "vfs"]
    info = subprocess.run(["buildah", *storage, "info"], capture_output=True, text=True, timeout=120)
    if info.returncode != 0:
        _cannot_build(f"buildah cannot run here (vfs storage): {info.stderr.strip()[-300:]}")
    try:
        built = subprocess.run(
            ["buildah", *storage, "bud", "--isolation", "chroot", "--tls-verify=false", "--layers=false",
             "-v", f"{apt_cache}:/var/cache/apt/archives", "-t", "localhost/openmpi-rdma:built", str(tmp_path / "ctx")],
            capture_output=True, text=True, timeout=900)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        pushed = subprocess.run(["buildah", *storage, "push", "localhost/openmpi-rdma:built",
                                 f"oci:{tmp_path / 'built'}:built"], capture_output=True, text=True, timeout=300)
        assert pushed.returncode == 0, pushed.stderr[-2000:]
    finally:
        subprocess.run(["buildah", *storage, "rm", "--all"], capture_output=True, timeout=120)
        shutil.rmtree(tmp_path / "storage", ignore_errors=True)
    check = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", f"oci:{tmp_path / 'built'}:built",
                            "--require", "openmpi>=4.1", "--require", "ibverbs", "--json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    out = json.loads(check.stdout)
    assert check.returncode == 0, out
    assert {r["requirement"] for r in out["requirements"] if r["met"]} == {"openmpi>=4.1", "ibverbs"}
