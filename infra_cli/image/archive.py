"""Image stores on disk: `docker save` archives (old and Docker 25+ formats) and OCI image-layout directories."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import BinaryIO

from infra_cli.image.blob import Descriptor, check_digest_syntax
from infra_cli.image.errors import ImageReadError
from infra_cli.image.manifest import DOCKER_MANIFEST, MAX_MANIFEST_BYTES

REF_NAME = "org.opencontainers.image.ref.name"


class _Slice:
    """A byte range of an open file, read with its own handle (one per blob: threads never share one)."""

    def __init__(self, path: Path, offset: int, size: int):
        self._fh = open(path, "rb")
        self._fh.seek(offset)
        self._left = size

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        data = self._fh.read(n)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._fh.close()


class OciLayoutStore:
    def __init__(self, path: str, tag: str | None):
        self.root_dir, self.tag = Path(path), tag
        self.description = f"oci:{path}" + (f":{tag}" if tag else "")
        if not (self.root_dir / "index.json").is_file():
            raise ImageReadError(f"{path} is not an OCI image layout (no index.json)",
                                 "point oci: at a directory written by `skopeo copy ... oci:DIR:TAG` or `umoci init`",
                                 where=self.description)

    def _blob_path(self, digest: str) -> Path:
        return self.root_dir / "blobs" / "sha256" / check_digest_syntax(digest)

    def root(self) -> tuple[bytes, str, str | None]:
        index = json.loads((self.root_dir / "index.json").read_bytes())
        entries = [Descriptor.from_json(m) for m in index.get("manifests") or []]
        tags = [e.annotations.get(REF_NAME) for e in entries]
        if self.tag is not None:
            entries = [e for e in entries if e.annotations.get(REF_NAME) == self.tag]
        if len(entries) != 1:
            known = ", ".join(t for t in tags if t) or "none"
            raise ImageReadError(
                f"{self.description}: {'no' if not entries else 'several'} manifests match (tags: {known})",
                "name one tag: oci:DIR:TAG", where=self.description)
        chosen = entries[0]
        return self.manifest(chosen.digest)[0], chosen.media_type, chosen.digest

    def manifest(self, digest: str) -> tuple[bytes, str]:
        return self._read_small(digest), ""

    def _read_small(self, digest: str) -> bytes:
        path = self._blob_path(digest)
        if not path.is_file():
            raise ImageReadError(f"{self.description}: blob {digest} is missing", "copy the image again", where=self.description)
        with open(path, "rb") as fh:
            return fh.read(MAX_MANIFEST_BYTES + 1)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        path = self._blob_path(desc.digest)
        if not path.is_file():
            raise ImageReadError(f"{self.description}: blob {desc.digest} is missing", "copy the image again",
                                 where=self.description)
        return open(path, "rb")

    def close(self) -> None:
        pass


class DockerArchiveStore:
    """`docker save` output. Its manifest.json names the config and layer tars; layers are verified against
    their blob names (Docker 25+) or the config's diff_ids (older, `<id>/layer.tar`)."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.description = f"docker-archive:{path}"
        try:
            with tarfile.open(self.path, "r:") as tar:   # headers only: data is read later by offset
                self._members = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile() or m.issym()}
        except (OSError, tarfile.TarError) as exc:
            raise ImageReadError(f"cannot read {path} as a docker save archive: {exc}",
                                 "pass an uncompressed `docker save -o FILE IMAGE` tar (gunzip it first if compressed)",
                                 where=self.description) from None
        try:
            entry = json.loads(self._read_member("manifest.json"))[0]
            self._config_name, self._layer_names = entry["Config"], list(entry["Layers"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ImageReadError(f"{path}: manifest.json is missing or malformed ({exc})",
                                 "this is not `docker save` output", where=self.description) from None
        self._config = self._read_member(self._config_name)
        self._digests: dict[str, str] = {}

    def _member(self, name: str) -> tarfile.TarInfo:
        member = self._members.get(name.lstrip("./"))
        for _ in range(8):   # Docker 25+ archives link legacy names to blobs/sha256/...
            if member is None or not member.issym():
                break
            target = os.path.normpath(os.path.join(os.path.dirname(member.name), member.linkname))
            member = self._members.get(target)
        if member is None:
            raise ImageReadError(f"{self.description}: {name} is missing from the archive",
                                 "the archive is incomplete; save the image again", where=self.description)
        return member

    def _read_member(self, name: str) -> bytes:
        member = self._member(name)
        stream = _Slice(self.path, member.offset_data, member.size)
        try:
            return stream.read(min(member.size, MAX_MANIFEST_BYTES + 1))
        finally:
            stream.close()

    def _digest_of(self, name: str, fallback: str | None) -> str:
        base = self._member(name).name
        parts = base.split("/")
        if len(parts) >= 3 and parts[-3] == "blobs" and parts[-2] == "sha256":
            return f"sha256:{parts[-1]}"
        if name == self._config_name and base.endswith(".json"):
            return f"sha256:{Path(base).stem}"
        if fallback is None:
            raise ImageReadError(f"{self.description}: cannot tell the digest of {name}",
                                 "save the image again with a current docker", where=self.description)
        return fallback

    def root(self) -> tuple[bytes, str, str | None]:
        config_digest = self._digest_of(self._config_name, None)
        try:
            diff_ids = list(json.loads(self._config)["rootfs"]["diff_ids"])
        except (KeyError, TypeError, ValueError):
            diff_ids = [None] * len(self._layer_names)
        layers = []
        for name, diff_id in zip(self._layer_names, diff_ids + [None] * len(self._layer_names)):
            digest = self._digest_of(name, diff_id)
            self._digests[digest] = name
            layers.append({"mediaType": "application/vnd.docker.image.rootfs.diff.tar", "digest": digest,
                           "size": self._member(name).size})
        self._digests[config_digest] = self._config_name
        manifest = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                               "digest": config_digest, "size": len(self._config)},
                    "layers": layers}
        # synthesised here, so there is no registry digest to verify: the config and layers still are
        return json.dumps(manifest).encode(), DOCKER_MANIFEST, None

    def manifest(self, digest: str) -> tuple[bytes, str]:
        raise ImageReadError("a docker save archive holds no manifest index", None, where=self.description)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        member = self._member(self._digests[desc.digest])
        return _Slice(self.path, member.offset_data, member.size)

    def close(self) -> None:
        pass
