"""Malformed image metadata is exit 2 with a message naming the document and what is wrong, never a traceback
(which exits 1, and CI reads 1 as "requirement not met"). Real layouts built by umoci, then edited as a hand
or a broken tool would: index.json, manifests, configs, and `docker save`'s manifest.json and config."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from image_fixtures import base_layer, build_oci, manifest_of, point_tag, write_blob

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def unreadable(ref: str) -> dict:
    """The one error of an image that cannot be read, asserting exit 2 and no traceback."""
    proc = cli(ref, "--json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-3000:])
    errors = json.loads(proc.stdout)["errors"]
    assert len(errors) == 1 and errors[0]["rule"] == "image.read", errors
    return errors[0]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A one-layer amd64 image in an OCI layout, tag `base`; tests copy it before editing."""
    layout = tmp_path_factory.mktemp("small") / "layout"
    build_oci(layout, "base", [base_layer()])
    return layout


@pytest.fixture
def layout(small, tmp_path) -> Path:
    import shutil

    copy = tmp_path / "layout"
    shutil.copytree(small, copy)
    return copy


# ---- index.json -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, why", [
    (b"{bad", "not valid JSON (Expecting property name"),
    (b"[]", "it is a list where a JSON object belongs"),
    (b"", "not valid JSON"),
    (b'{"manifests": "abc"}', "'manifests' is a string where a list belongs"),
    (b'{"manifests": {"a": 1}}', "'manifests' is an object where a list belongs"),
    (b'{"manifests": [1]}', "manifests[0] is malformed: it is a number where a descriptor object belongs"),
    (b'{"manifests": [{"annotations": {"org.opencontainers.image.ref.name": "base"}}]}',
     "manifests[0] is malformed: it has no digest"),
    (b'{"manifests": [{"digest": "sha256:zz", "annotations": {"org.opencontainers.image.ref.name": "base"}}]}',
     "entry 'base': unsupported or malformed digest 'sha256:zz'"),
    (b'{"manifests": [{"digest": "x", "annotations": []}]}', "'annotations' is a list where an object belongs"),
    (b'{"manifests": [{"digest": "x", "annotations": {"org.opencontainers.image.ref.name": 3}}]}',
     "its org.opencontainers.image.ref.name is a number"),
])
def test_corrupt_index_json_is_exit_2_naming_the_file(layout, body, why):
    (layout / "index.json").write_bytes(body)
    error = unreadable(f"oci:{layout}:base")
    assert f"{layout}/index.json" in error["message"] and why in error["message"], error
    assert error["file"] == f"oci:{layout}:base"


# ---- manifests and configs (the code every source shares: layout, archive, registry) ----------------------

def _config_of(layout: Path, manifest: dict) -> dict:
    return json.loads((layout / "blobs/sha256" / manifest["config"]["digest"].split(":")[1]).read_text())


MANIFEST_EDITS = {
    "not an object": (lambda m: [], "is malformed: it is a list where a JSON object belongs"),
    "layers a string": (lambda m: {**m, "layers": "abc"}, "'layers' is a string where a list belongs"),
    "layer a number": (lambda m: {**m, "layers": [1]}, "layers[0] is malformed: it is a number where a descriptor"),
    "layer without digest": (lambda m: {**m, "layers": [{"size": 1}]}, "layers[0] is malformed: it has no digest"),
    "layer digest a path": (lambda m: {**m, "layers": [{"digest": "../../etc/passwd", "size": 1}]},
                            "layers[0]: unsupported or malformed digest '../../etc/passwd'"),
    "config a list": (lambda m: {**m, "config": []}, "config is malformed: it is a list where a descriptor"),
    "no config": (lambda m: {k: v for k, v in m.items() if k != "config"}, "is malformed: it has no config descriptor"),
    "config size a string": (lambda m: {**m, "config": {**m["config"], "size": "big"}},
                             "config is malformed: its size is a string where an integer belongs"),
    "mediaType a number": (lambda m: {**m, "mediaType": 5}, "'mediaType' is a number where a string belongs"),
}


@pytest.mark.parametrize("edit", MANIFEST_EDITS)
def test_malformed_manifest_is_exit_2_naming_it(layout, edit):
    change, why = MANIFEST_EDITS[edit]
    ref = point_tag(layout, "edited", change(manifest_of(layout, "base")))
    error = unreadable(ref)
    assert error["message"].startswith("manifest sha256:") and why in error["message"], error
    assert error["file"] == ref


def test_manifest_that_is_not_json_is_exit_2(layout):
    error = unreadable(point_tag(layout, "edited", b"{nope"))
    assert error["message"].startswith("manifest sha256:") and "is malformed: not valid JSON" in error["message"]


CONFIG_EDITS = {
    "not an object": (lambda c: [], "is malformed: it is a list where a JSON object belongs"),
    "not JSON": (lambda c: b"{x", "is malformed: not valid JSON"),
    "config a list": (lambda c: {**c, "config": []}, "'config' is a list where an object belongs"),
    "Env a string": (lambda c: {**c, "config": {"Env": "PATH=/usr/bin"}}, "'Env' is a string where a list belongs"),
    "Env entry a number": (lambda c: {**c, "config": {"Env": [1]}}, "Env[0] is a number where a string belongs"),
    "os a number": (lambda c: {**c, "os": 5}, "'os' is a number where a string belongs"),
    "architecture a list": (lambda c: {**c, "architecture": ["amd64"]}, "'architecture' is a list where a string"),
}


@pytest.mark.parametrize("edit", CONFIG_EDITS)
def test_malformed_image_config_is_exit_2_naming_it(layout, edit):
    change, why = CONFIG_EDITS[edit]
    manifest = manifest_of(layout, "base")
    digest, size = write_blob(layout, change(_config_of(layout, manifest)))
    error = unreadable(point_tag(layout, "edited", {**manifest, "config": {**manifest["config"], "digest": digest,
                                                                             "size": size}}))
    assert error["message"].startswith(f"config {digest}") and why in error["message"], error


INDEX = "application/vnd.oci.image.index.v1+json"


@pytest.mark.parametrize("entries, why", [
    ("x", "'manifests' is a string where a list belongs"),
    ([{"digest": "sha256:" + "1" * 64, "platform": "linux/amd64"}], "manifests[0] is malformed: 'platform' is a string"),
    ([{"digest": "sha256:" + "1" * 64, "platform": {"os": 1}}], "manifests[0].platform is malformed: 'os' is a number"),
    ([{"digest": "../x", "platform": {"os": "linux", "architecture": "amd64"}}],
     "entry for linux/amd64: unsupported or malformed digest '../x'"),
])
def test_malformed_image_index_is_exit_2_naming_it(layout, entries, why):
    ref = point_tag(layout, "edited", {"schemaVersion": 2, "mediaType": INDEX, "manifests": entries}, INDEX)
    error = unreadable(ref)
    assert error["message"].startswith("image index sha256:") and why in error["message"], error


# ---- docker save archives ---------------------------------------------------------------------------------

def _archive(path: Path, layout: Path, manifest_json: bytes, config: bytes | None = None) -> str:
    """A Docker 25+ style `docker save` tar of the layout's `base` image with the given manifest.json."""
    manifest = manifest_of(layout, "base")
    blobs = layout / "blobs" / "sha256"
    with tarfile.open(path, "w") as tar:
        for desc in [manifest["config"], *manifest["layers"]]:
            hexpart = desc["digest"].split(":")[1]
            data = config if config is not None and desc is manifest["config"] else (blobs / hexpart).read_bytes()
            info = tarfile.TarInfo(f"blobs/sha256/{hexpart}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest_json)
        tar.addfile(info, io.BytesIO(manifest_json))
    return f"docker-archive:{path}"


def _entry(layout: Path, **fields) -> bytes:
    manifest = manifest_of(layout, "base")
    entry = {"Config": f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}", "RepoTags": ["x:y"],
             "Layers": [f"blobs/sha256/{l['digest'].split(':')[1]}" for l in manifest["layers"]]}
    return json.dumps([{**entry, **fields}]).encode()


@pytest.mark.parametrize("manifest_json, why", [
    (b"{bad", "manifest.json is malformed: not valid JSON"),
    (b"{}", "manifest.json is malformed: it is an object where a list of images belongs"),
    (b"[]", "manifest.json is malformed: it lists no image"),
    (b"[1]", "manifest.json[0] is malformed: it is a number where an object belongs"),
    (b"[{}]", "manifest.json[0] is malformed: it names no Config"),
    ({"Config": 5}, "manifest.json[0] is malformed: its Config is a number"),
    ({"Layers": "abc"}, "manifest.json[0] is malformed: 'Layers' is a string where a list belongs"),
    ({"Layers": [1]}, "manifest.json[0] is malformed: Layers[0] is a number where a string belongs"),
    ({"Layers": None}, "manifest.json[0] is malformed: it names no Layers"),
])
def test_malformed_docker_archive_manifest_json_is_exit_2(layout, tmp_path, manifest_json, why):
    if isinstance(manifest_json, dict):     # the real entry with these fields changed
        manifest_json = _entry(layout, **manifest_json)
    error = unreadable(_archive(tmp_path / "a.tar", layout, manifest_json))
    assert why in error["message"] and str(tmp_path / "a.tar") in error["message"], error


def test_docker_archive_config_with_malformed_diff_ids_is_exit_2(layout, tmp_path):
    """Old-format archives take layer digests from rootfs.diff_ids, so their shape is checked where they are read."""
    config = _config_of(layout, manifest_of(layout, "base"))
    for diff_ids, why in (("ab", "'diff_ids' is a string where a list belongs"),
                          ([1], "diff_ids[0] is a number where a string belongs"),
                          (["sha256:zz"], "rootfs.diff_ids[0]: unsupported or malformed digest 'sha256:zz'")):
        data = json.dumps({**config, "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
        # the config keeps its old name (and so a digest it no longer matches): diff_ids are read first
        error = unreadable(_archive(tmp_path / "a.tar", layout, _entry(layout), data))
        assert why in error["message"], error
