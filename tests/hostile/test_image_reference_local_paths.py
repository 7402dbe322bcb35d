"""`infra image check build/mpi` with `oci:` forgotten: a name that says no registry and is a local OCI layout (or
a file) is refused with the prefix it lacks (exit 2), before any request; Docker Hub is never asked for it.

Which wins where a name is both a valid registry reference and a local path: a name that says its registry
(`docker.io/...`, `host:port/...`, `docker://...`) is a registry reference whatever this machine holds; a bare name
(`build/mpi`, Docker Hub by default) that is a local OCI layout or file is refused with the did-you-mean, naming
`docker.io/NAME` for the Docker Hub image. Reading the local one silently would make one command mean two images
depending on the current directory (a developer's machine, the pre-commit hook, CI); asking Docker Hub for a name
the user has on disk is, nearly always, the forgotten prefix. A folder that is not an OCI layout never stops a
registry name (a folder `ubuntu` beside `ubuntu:22.04`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from image_fixtures import Layer, build_oci
from infra_cli.image.errors import ImageReadError
from infra_cli.image.reference import refuse_local_path

ROOT = Path(__file__).resolve().parents[2]


def cli(cwd: Path, image: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", image, "--timeout", "5", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


@pytest.fixture
def layout(tmp_path) -> Path:
    """A project whose build/mpi is an OCI layout (tag v1), built by umoci."""
    build_oci(tmp_path / "build" / "mpi", "v1", [Layer().file("/app/x", "1")])
    return tmp_path


def test_a_local_layout_named_without_oci_is_the_did_you_mean(layout):
    done = cli(layout, "build/mpi")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "build/mpi is a local OCI layout: did you mean oci:build/mpi?" in done.stderr, done.stderr
    assert "docker.io/build/mpi" in done.stderr          # how to mean Docker Hub's image of that name
    tagged = cli(layout, "build/mpi:v1", "--json")
    assert tagged.returncode == 2
    [error] = json.loads(tagged.stdout)["errors"]
    assert error["message"] == "build/mpi is a local OCI layout: did you mean oci:build/mpi:v1?"
    assert cli(layout, "oci:build/mpi:v1").returncode == 1   # the suggestion reads the image (openmpi not in it)


def test_a_local_file_named_without_docker_archive_is_the_did_you_mean(tmp_path):
    (tmp_path / "mpi.tar").write_bytes(b"")
    done = cli(tmp_path, "mpi.tar")
    assert done.returncode == 2 and "mpi.tar is a local file: did you mean docker-archive:mpi.tar?" in done.stderr


def test_paths_that_leave_the_folder_and_links_to_layouts_are_named_as_typed(layout):
    project = layout / "project"
    project.mkdir()
    escaping = cli(project, "../build/mpi")
    assert escaping.returncode == 2 and "did you mean oci:../build/mpi?" in escaping.stderr, escaping.stderr
    (project / "sub").mkdir()
    through = cli(project, "sub/../../build/mpi")      # a bare name whose path climbs out of the folder
    assert through.returncode == 2 and "did you mean oci:sub/../../build/mpi?" in through.stderr, through.stderr
    (project / "mpi").symlink_to(layout / "build" / "mpi")
    linked = cli(project, "mpi")
    assert linked.returncode == 2 and "mpi is a local OCI layout: did you mean oci:mpi?" in linked.stderr


def test_a_name_that_says_its_registry_is_a_registry_reference_even_beside_a_layout(layout, monkeypatch):
    monkeypatch.chdir(layout)
    for name in ("docker.io/build/mpi", "localhost:5000/build/mpi"):   # the same layout under each name
        shutil.copytree(layout / "build" / "mpi", layout / name)
    for name in ("docker.io/build/mpi", "localhost:5000/build/mpi", "docker://build/mpi"):
        refuse_local_path(name)          # no did-you-mean: the registry is asked
    with pytest.raises(ImageReadError, match="did you mean oci:build/mpi"):
        refuse_local_path("build/mpi")   # the same folder, named bare


def test_what_is_not_a_layout_never_stops_a_registry_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ubuntu").mkdir()                          # a plain folder
    (tmp_path / "loop").symlink_to(tmp_path / "loop")     # a link to itself
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "index.json")          # never opened: a FIFO would block a reader
    for name in ("ubuntu", "ubuntu:22.04", "loop", "fifo", "x" * 5000, "build/mpi\x1b[31m"):
        refuse_local_path(name)
    with pytest.raises(ImageReadError):
        (tmp_path / "fifo" / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        refuse_local_path("fifo")
