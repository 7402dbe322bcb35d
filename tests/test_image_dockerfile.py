"""The openmpi-rdma Dockerfile template: what it installs, and an image equivalent to its build checked.

Here, cheaply and offline, the image is built the way its RUN steps would: one layer per `apt-get install`
step, from the real .deb files of exactly the packages the rendered Dockerfile names, plus the alternatives
links Debian's postinst makes. tests/test_build_real.py builds the rendered Dockerfile itself with buildah.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from image_fixtures import base_layer, build_oci, package_layer
from infra_cli.diagnostics import DiagnosticError
from infra_cli.image.dockerfile import render_dockerfile
from infra_cli.knowledge.docker_templates import load_template_meta

ROOT = Path(__file__).resolve().parent.parent


def apt_install_steps(dockerfile: str) -> list[list[str]]:
    """The packages of each `apt-get install` in the Dockerfile's RUN instructions, in order."""
    joined = re.sub(r"\\\n", " ", dockerfile)
    steps = []
    for line in joined.splitlines():
        if not line.startswith("RUN "):
            continue
        for command in line[4:].split("&&"):
            words = command.split()
            if words[:2] == ["apt-get", "install"]:
                steps.append([w for w in words[2:] if not w.startswith("-")])
    return steps


def test_rendered_dockerfile_installs_open_mpi_and_rdma_core():
    text = render_dockerfile("openmpi-rdma", {"pip_packages": ["deepspeed"]})
    packages = {p for step in apt_install_steps(text) for p in step}
    assert {"openmpi-bin", "libopenmpi3", "libibverbs1", "ibverbs-providers"} <= packages
    assert text.startswith("# Rendered by `infra render`") and "FROM nvcr.io/nvidia/cuda:" in text
    assert "pip install --no-cache-dir deepspeed\n" in text   # one shell word, quoted only when it must be


def test_source_build_goes_to_usr_local_and_options_render():
    text = render_dockerfile("openmpi-rdma", {"openmpi_source": "4.1.6", "nccl_rdma_sharp_plugin": True})
    assert "open-mpi/v4.1/openmpi-4.1.6.tar.gz" in text and "--prefix=/usr/local" in text
    assert "ENV LD_LIBRARY_PATH=/usr/local/nccl-rdma-sharp-plugins/lib" in text
    assert "openmpi-bin" not in text and "hpcx" not in text.lower()


@pytest.mark.parametrize("params, message", [
    ({"openmpi_version": "4.1"}, "no parameter(s) openmpi_version"),
    ({"openmpi_source": "latest"}, "neither 'distro' nor a version"),
    ({"pip_packages": "deepspeed"}, "pip_packages must be a list"),
])
def test_bad_parameters_are_diagnostics(params, message):
    with pytest.raises(DiagnosticError) as exc:
        render_dockerfile("openmpi-rdma", params)
    assert message in str(exc.value)
    with pytest.raises(DiagnosticError, match="known templates: openmpi-rdma"):
        render_dockerfile("no-such-template", {})


def test_image_built_like_the_dockerfile_passes_image_check(tmp_path):
    meta = load_template_meta("openmpi-rdma")
    steps = apt_install_steps(render_dockerfile("openmpi-rdma", {}))
    layers = [base_layer()] + [package_layer(step, {}, tmp_path) for step in steps]
    layers[-1] = package_layer(steps[-1], meta["alternatives"], tmp_path)   # postinst of openmpi-bin
    ref = build_oci(tmp_path / "layout", "built", layers)
    args = [a for spec in meta["provides"] for a in ("--require", spec)]
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", ref, *args, "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0, out["requirements"]
    assert {r["requirement"] for r in out["requirements"]} == {"openmpi>=4.1", "mpi", "ibverbs"}
