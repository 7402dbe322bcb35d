"""Image stores on disk: `docker save` archives (old and Docker 25+ formats) and OCI image-layout directories."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from infra_cli.image.blob import Descriptor, check_digest_syntax
from infra_cli.image.strict_json import (json_type, list_of_strings, load_json, load_object, malformed, optional_list,
                                      optional_object)
from infra_cli.image.errors import ImageReadError
from infra_cli.image.layers import SPECIAL, Extended, cstr, octal, padded, special_length, ustar_name
from infra_cli.image.limits import MAX_DOCUMENT_BYTES
from infra_cli.image.manifest import DOCKER_MANIFEST

REF_NAME = "org.opencontainers.image.ref.name"
MAX_ARCHIVE_MEMBERS = 100_000      # `docker save` writes a few files per layer; bounds the members kept
_REGULAR, _SYMLINK = (b"0", b"\0", b"7"), b"2"


@dataclass(frozen=True)
class _Member:
    name: str
    flag: bytes
    size: int
    offset_data: int
    linkname: str

    def isfile(self) -> bool:
        return self.flag in _REGULAR

    def issym(self) -> bool:
        return self.flag == _SYMLINK


def _archive_members(fh: BinaryIO, path: Path, where: str) -> dict[str, _Member]:
    """The files and symlinks of an uncompressed tar by name, headers only (data is skipped by seeking).
    The layer walker's header rules and bounds apply: special entries bounded, PAX records strict."""
    members: dict[str, _Member] = {}
    extended, offset, count = Extended(), 0, 0

    def bad(problem: str) -> ImageReadError:
        return ImageReadError(f"{path}: tar entry {count + 1}: {problem}",
                              "this is not `docker save` output; save the image again", where=where)

    while True:
        fh.seek(offset)
        header = fh.read(512)
        if 0 < len(header) < 512:                # Go's archive/tar: io.ErrUnexpectedEOF, as for a layer
            raise bad("the archive ends in the middle of its tar header")
        if not header or header.count(0) == 512:
            return members                       # end of archive (or of the file: tolerated, as tar does)
        try:
            size, checksum = octal(header[124:136]), octal(header[148:156])
        except ValueError:
            checksum = None
        if checksum != sum(header[:148]) + 8 * 32 + sum(header[156:]):   # the checksum field counts as spaces
            raise ImageReadError(f"cannot read {path} as a docker save archive: tar entry {count + 1} has a bad "
                                 "header checksum", "pass an uncompressed `docker save -o FILE IMAGE` tar (gunzip "
                                 "it first if compressed)", where=where)
        flag = header[156:157]
        offset += 512
        if flag in SPECIAL:
            length = special_length(flag, size, bad)
            data = fh.read(length)
            if len(data) < length:
                raise bad("the archive ends inside it")
            extended.add(flag, data[:size], bad)
            offset += length
            continue
        name, link, size = extended.apply(header, size, bad) if extended.pending else (
            ustar_name(header), cstr(header[157:257]), size)
        count += 1
        if count > MAX_ARCHIVE_MEMBERS:
            raise bad(f"the archive holds more than {MAX_ARCHIVE_MEMBERS:,} entries, more than `docker save` writes")
        if flag in _REGULAR or flag == _SYMLINK:
            members[name.lstrip("./")] = _Member(name, flag, size if flag in _REGULAR else 0, offset, link)
        offset += padded(size) if flag in _REGULAR else 0


def open_regular(path: Path, where: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file. A FIFO or device would block or never end: it is
    refused (opened non-blocking, so that even a FIFO with no writer is seen and refused at once)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ImageReadError(f"cannot read {path}: {exc.strerror or exc}", None, where=where) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise ImageReadError(f"{path} is {kind}, not a regular file", "point at a file written by `docker save` or "
                             "`skopeo copy` (a pipe would have to be read to its end before it could be checked)",
                             where=where)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


class _Slice:
    """A byte range of an open file, read with its own handle (one per blob: threads never share one)."""

    def __init__(self, path: Path, offset: int, size: int, where: str):
        self._fh = open_regular(path, where)
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

    def _index_entries(self) -> list[Descriptor]:
        """index.json's manifests; anyone may have edited the file, so its every shape is checked."""
        path = self.root_dir / "index.json"
        try:
            with open_regular(path, self.description) as fh:
                data = fh.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise ImageReadError(f"cannot read {path}: {exc.strerror or exc}", None, where=self.description) from None
        if len(data) > MAX_DOCUMENT_BYTES:
            raise malformed(str(path), f"it is larger than {MAX_DOCUMENT_BYTES >> 20} MiB", self.description)
        index = load_object(data, str(path), self.description)
        entries = [Descriptor.from_json(m, f"{path} manifests[{i}]", self.description)
                   for i, m in enumerate(optional_list(index, "manifests", str(path), self.description))]
        for i, entry in enumerate(entries):
            tag = entry.annotations.get(REF_NAME)
            if tag is not None and not isinstance(tag, str):
                raise malformed(f"{path} manifests[{i}]", f"its {REF_NAME} is {json_type(tag)}", self.description)
        return entries

    def root(self) -> tuple[bytes, str, str | None]:
        entries = self._index_entries()
        tags = [e.annotations.get(REF_NAME) for e in entries]
        if self.tag is not None:
            entries = [e for e in entries if e.annotations.get(REF_NAME) == self.tag]
        if len(entries) != 1:
            known = ", ".join(t for t in tags if t) or "none"
            raise ImageReadError(
                f"{self.description}: {'no' if not entries else 'several'} manifests match (tags: {known})",
                "name one tag: oci:DIR:TAG", where=self.description)
        chosen = entries[0]
        tag = chosen.annotations.get(REF_NAME)
        check_digest_syntax(chosen.digest, f"{self.root_dir / 'index.json'} entry" + (f" {tag!r}" if tag else ""))
        return self.manifest(chosen.digest)[0], chosen.media_type, chosen.digest

    def manifest(self, digest: str) -> tuple[bytes, str]:
        return self._read_small(digest), ""

    def _read_small(self, digest: str) -> bytes:
        path = self._blob_path(digest)
        if not path.is_file():
            raise ImageReadError(f"{self.description}: blob {digest} is missing", "copy the image again", where=self.description)
        try:
            with open_regular(path, self.description) as fh:
                return fh.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise ImageReadError(f"cannot read {path}: {exc.strerror or exc}", None, where=self.description) from None

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        path = self._blob_path(desc.digest)
        if not path.is_file():
            raise ImageReadError(f"{self.description}: blob {desc.digest} is missing", "copy the image again",
                                 where=self.description)
        return open_regular(path, self.description)

    def close(self) -> None:
        pass


class DockerArchiveStore:
    """`docker save` output. Its manifest.json names the config and layer tars; layers are verified against
    their blob names (Docker 25+) or the config's diff_ids (older, `<id>/layer.tar`)."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.description = f"docker-archive:{path}"
        try:
            with open_regular(self.path, self.description) as fh:    # headers only: data is read by offset
                self._members = _archive_members(fh, self.path, self.description)
        except OSError as exc:
            raise ImageReadError(f"cannot read {path} as a docker save archive: {exc}",
                                 "pass an uncompressed `docker save -o FILE IMAGE` tar (gunzip it first if compressed)",
                                 where=self.description) from None
        self._config_name, self._layer_names = self._first_image()
        self._config = self._read_member(self._config_name)
        self._digests: dict[str, str] = {}

    def _first_image(self) -> tuple[str, list[str]]:
        """(config name, layer names) of manifest.json's first image, every shape checked."""
        what, hint = f"{self.path}: manifest.json", "this is not `docker save` output; save the image again"
        images = load_json(self._read_member("manifest.json"), what, self.description)
        if not isinstance(images, list) or not images:
            problem = "it lists no image" if images == [] else f"it is {json_type(images)} where a list of images belongs"
            raise malformed(what, problem, self.description, hint)
        first, what = images[0], f"{what}[0]"
        if not isinstance(first, dict):
            raise malformed(what, f"it is {json_type(first)} where an object belongs", self.description, hint)
        config = first.get("Config")
        if not isinstance(config, str) or not config:
            raise malformed(what, "it names no Config" if config is None else f"its Config is {json_type(config)}",
                            self.description, hint)
        if first.get("Layers") is None:
            raise malformed(what, "it names no Layers", self.description, hint)
        return config, list_of_strings(first, "Layers", what, self.description)

    def _diff_ids(self) -> list[str]:
        """The config's rootfs.diff_ids: the layers' digests in the old format, where blob names carry none."""
        what = f"{self.path}: {self._config_name}"
        config = load_object(self._config, what, self.description)
        diff_ids = list_of_strings(optional_object(config, "rootfs", what, self.description), "diff_ids",
                                   f"{what} rootfs", self.description)
        for i, diff_id in enumerate(diff_ids):
            check_digest_syntax(diff_id, f"{what} rootfs.diff_ids[{i}]")
        return diff_ids

    def _member(self, name: str) -> _Member:
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
        stream = _Slice(self.path, member.offset_data, member.size, self.description)
        try:
            return stream.read(min(member.size, MAX_DOCUMENT_BYTES + 1))
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
        diff_ids = self._diff_ids()
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

    def open_blob(self, desc: Descriptor) -> _Slice:
        member = self._member(self._digests[desc.digest])
        return _Slice(self.path, member.offset_data, member.size, self.description)

    def close(self) -> None:
        pass
