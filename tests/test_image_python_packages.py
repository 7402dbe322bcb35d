"""The `deepspeed`, `mpi4py` and `horovod` profiles of validators/image_evidence.yaml on real OCI images (umoci):
pip's layout (site-packages + dist-info), Debian's (dist-packages, python3-mpi4py) and an image without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from image_fixtures import Layer, base_layer, build_oci
from infra_cli.image.check import check_image
from infra_cli.knowledge.requirements import parse_requirement

SITE = "/opt/conda/lib/python3.10/site-packages"


def pip_layer() -> Layer:
    return (Layer().dir("/opt").dir("/opt/conda").dir("/opt/conda/lib").dir("/opt/conda/lib/python3.10").dir(SITE)
            .file(f"{SITE}/deepspeed/__init__.py", "from .runtime import engine\n")
            .file(f"{SITE}/deepspeed/git_version_info_installed.py", "version='0.14.4'\n")
            .file(f"{SITE}/deepspeed-0.14.4.dist-info/METADATA", "Name: deepspeed\nVersion: 0.14.4\n")
            .file(f"{SITE}/mpi4py/__init__.py", "")
            .file(f"{SITE}/mpi4py/MPI.cpython-310-x86_64-linux-gnu.so", b"\x7fELF")
            .file(f"{SITE}/mpi4py-3.1.6.dist-info/METADATA", "Name: mpi4py\n")
            .file(f"{SITE}/horovod/__init__.py", "__version__ = '0.28.1'\n"))


def results(ref: str, *specs: str) -> dict[str, tuple[bool, str | None]]:
    out = check_image(ref, list(specs))
    return {parse_requirement(r.requirement).name: (r.met, r.version) for r in out.requirements}


def test_pip_installed_packages_are_found_with_their_versions(tmp_path: Path):
    ref = build_oci(tmp_path / "l", "pip", [base_layer(), pip_layer()])
    found = results(ref, "deepspeed>=0.14", "mpi4py", "horovod>=0.28")
    assert found == {"deepspeed": (True, "0.14.4"), "mpi4py": (True, "3.1.6"), "horovod": (True, "0.28.1")}


def test_an_image_without_them_does_not_meet_them(tmp_path: Path):
    ref = build_oci(tmp_path / "l", "bare", [base_layer()])
    assert {name: met for name, (met, _) in results(ref, "deepspeed", "mpi4py", "horovod").items()} == \
        {"deepspeed": False, "mpi4py": False, "horovod": False}


def test_a_version_below_the_requirement_is_not_met(tmp_path: Path):
    ref = build_oci(tmp_path / "l", "old", [base_layer(), pip_layer()])
    assert results(ref, "deepspeed>=0.15")["deepspeed"] == (False, "0.14.4")


def test_debian_python3_mpi4py_in_dist_packages(tmp_path: Path):
    dist = "/usr/lib/python3/dist-packages"
    layer = (Layer().dir("/usr/lib/python3").dir(dist)
             .file(f"{dist}/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so", b"\x7fELF")
             .file(f"{dist}/mpi4py-3.1.4.egg-info", "Metadata-Version: 2.1\nName: mpi4py\n"))
    ref = build_oci(tmp_path / "l", "deb", [base_layer(), layer])
    assert results(ref, "mpi4py")["mpi4py"] == (True, "3.1.4")


@pytest.mark.parametrize("spec", ["deepspeed", "mpi4py", "horovod"])
def test_removing_the_package_in_a_later_layer_unmeets_it(tmp_path: Path, spec):
    gone = Layer().whiteout(f"{SITE}/{spec}")
    ref = build_oci(tmp_path / "l", "gone", [base_layer(), pip_layer(), gone])
    assert results(ref, spec)[spec][0] is False
