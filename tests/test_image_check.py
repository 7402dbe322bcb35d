"""`infra image check` against real images: Debian's files, umoci/skopeo builds, a real docker-registry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from image_fixtures import (Layer, base_layer, build_oci, images, manifest_of, point_tag,  # noqa: F401 (fixtures)
                            registry, skopeo_copy)
from infra_cli.image.check import check_image

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def cli_json(*args: str) -> tuple[int, dict]:
    proc = cli(*args, "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def req(result: dict, name: str) -> dict:
    return next(r for r in result["requirements"] if r["requirement"] == name)


# ---- what an image carries ------------------------------------------------------------------------------

def test_openmpi_41_from_registry_reads_version_and_evidence(images):
    ref = f"{images.registry.host}/test/openmpi:oci"
    code, out = cli_json(ref, "--require", "openmpi>=4.1", "--require", "ibverbs", "--require", "ucx")
    assert code == 0, out
    om = req(out, "openmpi>=4.1")
    assert om["met"] and om["variant"] == "Open MPI" and om["version"].startswith("4.1.4")
    paths = {e["path"] for e in om["evidence"]}
    assert "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4" in paths
    launcher = next(e for e in om["evidence"] if e["rule"] == "mpirun on PATH")
    assert launcher["via"] == ["/usr/bin/mpirun", "/etc/alternatives/mpirun", "/usr/bin/mpirun.openmpi", "/usr/bin/orterun"]
    assert req(out, "ibverbs")["version"].startswith("44.0")
    assert out["media_type"] == "application/vnd.oci.image.manifest.v1+json"
    assert out["digest"].startswith("sha256:") and out["bytes_read"] > 0 and out["layers_total"] == 3


def test_version_constraint_not_met_exits_1(images):
    proc = cli(images.refs["openmpi"], "--require", "openmpi>=5.0")
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout and "does not satisfy >=5.0" in proc.stdout


def test_version_without_dpkg_comes_from_ompi_pc_and_symlink_chain_through_a_dir_link(tmp_path):
    """mpirun reachable only through links spread over layers, one of them a directory link."""
    prefix = "/opt/ompi/4.1.6"
    layers = [
        Layer().file(f"{prefix}/bin/orterun", b"\x7fELF", 0o755).symlink(f"{prefix}/bin/mpirun", "orterun")
        .file(f"{prefix}/lib/libmpi.so.40.30.6", b"\x7fELF\0v4.1.6\0").file(f"{prefix}/lib/libopen-pal.so.40.30.3", b"x")
        .file(f"{prefix}/lib/pkgconfig/ompi.pc", "Name: Open MPI\nVersion: 4.1.6\n"),
        Layer().symlink("/opt/ompi/current", "4.1.6"),
        Layer().symlink("/opt/mpi/bin/mpirun", "../../ompi/current/bin/mpirun"),
    ]
    ref = build_oci(tmp_path / "l", "chain", layers, env={"PATH": "/opt/mpi/bin"})
    result = check_image(ref, ["openmpi>=4.1.6"])
    r = result.requirements[0]
    assert r.met and r.version == "4.1.6", r
    launcher = next(e for e in r.evidence if e["rule"] == "mpirun on PATH")
    assert launcher["via"][-1] == f"{prefix}/bin/orterun" and len(launcher["via"]) == 4
    # without the directory link the chain dangles: mpirun is not reachable, so no Open MPI
    ref = build_oci(tmp_path / "l", "dangling", [layers[0], layers[2]], env={"PATH": "/opt/mpi/bin"})
    r = check_image(ref, ["openmpi"]).requirements[0]
    assert not r.met and "mpirun on PATH" in r.reason


def test_mpich_only_is_mpi_but_not_openmpi(images):
    ref = f"{images.registry.host}/test/mpich:oci"
    code, out = cli_json(ref, "--require", "openmpi")
    assert code == 1 and not req(out, "openmpi")["met"]
    mpich = [f for f in out["findings"] if f["profile"] == "mpi" and f["state"] == "found"]
    assert [f["variant"] for f in mpich] == ["MPICH"] and mpich[0]["version"].startswith("4.0.2")
    code, out = cli_json(ref, "--require", "mpi")
    assert code == 0 and req(out, "mpi")["variant"] == "MPICH"
    human = cli(ref)
    assert "also found MPICH 4.0.2" in human.stdout


def test_openmpi_removed_by_whiteout_in_later_layer(images):
    code, out = cli_json(f"{images.registry.host}/test/whiteout:oci", "--require", "openmpi")
    assert code == 1
    assert "libopen-pal.so" in req(out, "openmpi")["reason"] and "mpirun on PATH" in req(out, "openmpi")["reason"]
    assert out["layers_read"] == 3 and not out["stopped_early"]


def test_opaque_directory_hides_lower_children(images):
    code, out = cli_json(f"{images.registry.host}/test/opaque:oci", "--require", "openmpi", "--require", "ibverbs")
    assert code == 1
    om = req(out, "openmpi")
    assert not om["met"] and "libmpi.so" in om["reason"] and "mpirun on PATH" not in om["reason"]
    assert not req(out, "ibverbs")["met"]


def test_docker_schema2_manifest(images):
    code, out = cli_json(f"{images.registry.host}/test/openmpi:v2s2", "--require", "openmpi>=4.1")
    assert code == 0 and out["media_type"] == "application/vnd.docker.distribution.manifest.v2+json"


def test_zstd_layers(images):
    code, out = cli_json(f"{images.registry.host}/test/openmpi:zstd", "--require", "openmpi>=4.1", "--require", "nccl")
    assert code == 1 and req(out, "openmpi>=4.1")["met"] and not req(out, "nccl")["met"]
    assert {layer["compression"] for layer in out["layers"]} == {"zstd"}


def test_multi_arch_index_platform_selection(images):
    ref = f"{images.registry.host}/test/multi:latest"
    code, out = cli_json(ref)
    assert code == 0 and out["platform"] == "linux/amd64"
    code, out = cli_json(ref, "--platform", "linux/arm64")
    assert code == 1 and out["platform"] == "linux/arm64"
    proc = cli(ref, "--platform", "linux/s390x")
    assert proc.returncode == 2 and "offers: linux/amd64, linux/arm64" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", ["nonsense", "linux", "linux/", "/amd64", "linux/amd64/v8/extra", "linux/amd 64", ""])
def test_malformed_platform_is_a_usage_error_before_the_image_is_read(images, value):
    for ref in (images.refs["openmpi"], "oci:/nonexistent:tag"):     # refused before the image is even opened
        proc = cli(ref, "--platform", value)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"error[image.platform]: --platform {value!r} is not OS/ARCH[/VARIANT]" in proc.stderr, proc.stderr
        assert "cannot be read as asked" in proc.stderr and "e.g. linux/amd64" in proc.stderr


def test_platform_must_match_a_single_platform_image(images):
    """An amd64 image asked for as arm64 is exit 2 saying what it is, from every source; without --platform,
    a single-platform image is judged as it is."""
    registry_ref = f"{images.registry.host}/test/openmpi:oci"
    for ref in (images.refs["openmpi"], registry_ref):
        proc = cli(ref, "--platform", "linux/arm64")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "no manifest for linux/arm64; it offers: linux/amd64 (a single-platform image" in proc.stderr
        assert ref.split("oci:")[-1] in proc.stderr          # which image
        code, out = cli_json(ref, "--platform", "linux/amd64")
        assert code == 0 and out["platform"] == "linux/amd64"
    code, out = cli_json(registry_ref, "--platform", "Linux/AMD64")     # read as docker reads it
    assert code == 0 and out["platform"] == "linux/amd64"
    code, out = cli_json(images.refs["arm64"])                          # no --platform: as before
    assert code == 1 and out["platform"] == "linux/arm64"
    code, out = cli_json(images.refs["arm64"], "--platform", "linux/arm64")
    assert code == 1 and out["platform"] == "linux/arm64"
    proc = cli(images.refs["arm64"], "--platform", "linux/amd64", "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["errors"][0]
    assert error["rule"] == "image.read" and "it offers: linux/arm64" in error["message"]
    assert "--platform linux/arm64" in error["hint"]


def test_platform_index_entry_whose_config_disagrees_is_exit_2(images, tmp_path):
    """An index that lists an amd64 image as arm64: asked for arm64, the config's word wins."""
    layout = tmp_path / "l"
    shutil.copytree(images.layout, layout)
    index = json.loads((layout / "index.json").read_text())
    amd64 = next(m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == "openmpi")
    entry = {k: v for k, v in amd64.items() if k != "annotations"}
    ref = point_tag(layout, "liar", {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                                     "manifests": [{**entry, "platform": {"os": "linux", "architecture": "arm64"}}]},
                    "application/vnd.oci.image.index.v1+json")
    proc = cli(ref, "--platform", "linux/arm64")
    assert proc.returncode == 2 and "lists a manifest for linux/arm64, but its config says linux/amd64" in proc.stderr


def test_early_exit_skips_lower_layers_only_when_they_cannot_matter(images):
    result = check_image(f"{images.registry.host}/test/openmpi:oci", ["openmpi>=4.1"])
    assert result.ok and result.stopped_early
    assert result.layers_read == 2 and [l["layer"] for l in result.layers] == [3, 2]   # base layer never read
    full = check_image(f"{images.registry.host}/test/openmpi:oci", ["openmpi>=4.1"], early_exit=False)
    assert full.layers_read == 3 and full.requirements[0].version == result.requirements[0].version


def test_layer_numbers_agree_in_text_json_evidence_layers_and_skopeo(images):
    """One numbering: from 1 in manifest order (skopeo inspect's Layers), the same in the text, the JSON
    evidence and layers[]; the layer so numbered is the blob that holds the evidence's path."""
    ref = f"{images.registry.host}/test/openmpi:oci"
    wanted = ["--require", "openmpi>=4.1", "--require", "ibverbs"]
    code, out = cli_json(ref, *wanted)
    text = cli(ref, *wanted)
    assert code == 0 and text.returncode == 0, text.stdout + text.stderr
    inspect = json.loads(subprocess.run(["skopeo", "inspect", "--tls-verify=false", f"docker://{ref}"],
                                        capture_output=True, text=True, check=True, timeout=60).stdout)
    manifest_layers = inspect["Layers"]
    assert len(manifest_layers) == out["layers_total"] == 3
    for entry in out["layers"]:
        assert entry["digest"] == manifest_layers[entry["layer"] - 1]
    blob_names = {}
    for number, digest in enumerate(manifest_layers, start=1):
        with tarfile.open(images.registry.blob_file(digest)) as tar:
            blob_names[number] = {"/" + n.lstrip("./") for n in tar.getnames()}
    evidence = [e for r in out["requirements"] for e in r["evidence"]]
    assert evidence and {e["layer"] for e in evidence} == {2}    # the Open MPI package layer, over the base
    for e in evidence:
        held = {e["path"], *e.get("via", [])[-1:]} & blob_names[e["layer"]]
        assert held, (e, e["layer"])
    for r in out["requirements"]:                 # the text shows each rule's first piece of evidence
        for e in {e["rule"]: e for e in reversed(r["evidence"])}.values():
            where = " -> ".join(e["via"]) if e.get("via") else e["path"]
            assert f"{e['rule']}: {where} (layer {e['layer']})" in text.stdout, (e, text.stdout)


# ---- sources ----------------------------------------------------------------------------------------------

def test_oci_layout_source(images):
    code, out = cli_json(images.refs["openmpi"], "--require", "openmpi>=4.1")
    assert code == 0 and out["reference"] == images.refs["openmpi"]
    proc = cli(f"oci:{images.layout}")     # several tags and none named
    assert proc.returncode == 2 and "name one tag" in proc.stderr


def test_docker_archive_old_format(images, tmp_path):
    archive = tmp_path / "old.tar"
    skopeo_copy(images.refs["openmpi"], f"docker-archive:{archive}:test/openmpi:latest")
    code, out = cli_json(f"docker-archive:{archive}", "--require", "openmpi>=4.1")
    assert code == 0 and req(out, "openmpi>=4.1")["version"].startswith("4.1.4")


def test_docker_archive_docker25_format(images, tmp_path):
    """Docker 25+ writes an OCI layout plus manifest.json naming blobs/sha256/...; build one from the layout."""
    manifest = manifest_of(images.layout, "whiteout")
    blobs = images.layout / "blobs" / "sha256"
    archive = tmp_path / "new.tar"
    with tarfile.open(archive, "w") as tar:
        for digest in [manifest["config"]["digest"]] + [l["digest"] for l in manifest["layers"]]:
            tar.add(blobs / digest.split(":")[1], f"blobs/sha256/{digest.split(':')[1]}")
        entry = [{"Config": f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}", "RepoTags": ["x:y"],
                  "Layers": [f"blobs/sha256/{l['digest'].split(':')[1]}" for l in manifest["layers"]]}]
        data = json.dumps(entry).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        import io
        tar.addfile(info, io.BytesIO(data))
    code, out = cli_json(f"docker-archive:{archive}", "--require", "openmpi")
    assert code == 1 and out["layers_read"] == 3     # the whiteout layer removes Open MPI here too


def test_corrupted_blob_in_layout_is_exit_2_with_digest_message(images, tmp_path):
    layout = tmp_path / "corrupt"
    shutil.copytree(images.layout, layout)
    layer = manifest_of(layout, "openmpi")["layers"][1]["digest"].split(":")[1]
    blob = layout / "blobs" / "sha256" / layer
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    proc = cli(f"oci:{layout}:openmpi")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"sha256:{layer}" in proc.stderr and "does not match its digest" in proc.stderr
    assert "push or save the image again" in proc.stderr


def test_truncated_blob_in_registry_is_exit_2(images, registry, tmp_path):
    unique = Layer().file("/opt/unique/payload.bin", os.urandom(200_000))
    ref = build_oci(tmp_path / "t", "trunc", [base_layer(), unique])
    pushed = registry.push(ref, "test/truncated:oci", "--format", "oci")
    layer = manifest_of(tmp_path / "t", "trunc")["layers"][1]["digest"]
    data_file = registry.blob_file(layer)
    data_file.write_bytes(data_file.read_bytes()[:-5000])
    code, out = cli_json(pushed, "--require", "openmpi")
    assert code == 2 and not out["ok"]
    message = out["errors"][0]["message"]
    assert layer in message and ("does not match its digest" in message or "ends in the middle" in message)


def test_unreachable_registry_and_bad_reference_exit_2_without_traceback():
    proc = cli("127.0.0.1:9/none/such:tag")
    assert proc.returncode == 2 and "cannot reach registry 127.0.0.1:9" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("Bad Name!")
    assert proc.returncode == 2 and "docker-archive:PATH" in proc.stderr


def test_bad_requirement_spec_is_a_clear_error():
    proc = cli("oci:/nonexistent:x", "--require", "openmpii")
    assert proc.returncode == 2 and "did you mean 'openmpi'" in proc.stderr and "Traceback" not in proc.stderr


def test_image_check_imports_no_azure_torch_or_jinja2(images):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "infra_cli", "image", "check",
                           images.refs["openmpi"]], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert not imported & {"azure", "torch", "jinja2", "requests"}, imported & {"azure", "torch", "jinja2", "requests"}


def test_mofed_hpcx_nccl_versions_and_net_plugin_library_path(tmp_path):
    """Layouts of NGC/Azure ML images (no Debian package ships MOFED, HPC-X or NCCL, so the files are written here)."""
    layers = [
        Layer().file("/usr/bin/ofed_info", "#!/bin/bash\necho MLNX_OFED_LINUX-5.8-1.0.1.1:\n", 0o755)
        .file("/opt/hpcx-v2.16-gcc-mlnx_ofed-ubuntu22.04-cuda12-x86_64/hpcx-init.sh", "# HPC-X\n")
        .symlink("/opt/hpcx", "hpcx-v2.16-gcc-mlnx_ofed-ubuntu22.04-cuda12-x86_64"),
        Layer().file("/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3", b"\x7fELF")
        .symlink("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "libnccl.so.2.18.3")
        .file("/usr/local/nccl-rdma-sharp-plugins/lib/libnccl-net.so.0.0.0", b"\x7fELF"),
    ]
    with_path = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/usr/local/nccl-rdma-sharp-plugins/lib"}
    ref = build_oci(tmp_path / "l", "gpu", layers, env=with_path)
    code, out = cli_json(ref, "--require", "nccl>=2.18", "--require", "mofed>=5.8", "--require", "hpcx", "--require", "nccl<2.18")
    assert code == 1
    assert req(out, "nccl>=2.18")["met"] and req(out, "nccl>=2.18")["version"] == "2.18.3"
    assert not req(out, "nccl<2.18")["met"]
    assert req(out, "mofed>=5.8")["version"].startswith("5.8-1.0.1")
    assert req(out, "hpcx")["met"] and req(out, "hpcx")["version"] == "2.16"
    plugin = next(f for f in out["findings"] if f["profile"] == "nccl")["optional"][0]["evidence"][0]
    assert plugin["on_library_path"] is True
    ref = build_oci(tmp_path / "l", "gpu-nolib", layers, env={"PATH": "/usr/bin"})
    assert "not on LD_LIBRARY_PATH" in cli(ref, "--require", "nccl").stdout


@pytest.mark.parametrize("text, host, repository, reference", [
    ("ubuntu:22.04", "registry-1.docker.io", "library/ubuntu", "22.04"),
    ("docker.io/library/ubuntu:22.04", "registry-1.docker.io", "library/ubuntu", "22.04"),
    ("docker.io/ubuntu:22.04", "registry-1.docker.io", "library/ubuntu", "22.04"),
    ("index.docker.io/ubuntu", "registry-1.docker.io", "library/ubuntu", "latest"),
    ("docker://docker.io/nvidia/cuda:12.4.1-devel-ubuntu22.04", "registry-1.docker.io", "nvidia/cuda",
     "12.4.1-devel-ubuntu22.04"),
    ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io", "nvidia/pytorch", "24.05-py3"),
    ("localhost:5000/ubuntu", "localhost:5000", "ubuntu", "latest"),
])
def test_docker_hub_names_are_normalised_as_docker_does(text, host, repository, reference):
    """Docker reads docker.io and index.docker.io as Docker Hub, pulled from registry-1.docker.io, and an official
    image's short name as library/NAME (distribution/reference normalize.go). No network: the parsed reference
    and the base URL the registry reader would contact."""
    from infra_cli.image.reference import parse_reference
    from infra_cli.image.registry import RegistryStore

    ref = parse_reference(text)
    assert (ref.host, ref.repository, ref.reference) == (host, repository, reference)
    store = RegistryStore(ref)
    store._scheme = "https"   # the scheme is probed on first use (a loopback registry may be plain http)
    assert store._base() == f"https://{host}"
