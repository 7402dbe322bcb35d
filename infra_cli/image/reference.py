"""IMAGE arguments: `host[:port]/repo[:tag|@digest]`, `docker-archive:PATH`, `oci:DIR[:TAG]`."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass

from infra_cli.image.errors import ImageReadError
from infra_cli.knowledge.grammars import DOCKER_HUB, REFERENCE_GRAMMAR, split_image_name, text_problem

__all__ = ["DOCKER_HUB", "ArchiveReference", "ImageReference", "LayoutReference", "RegistryReference",
           "parse_reference", "refuse_local_path"]

_HINT = ("write host[:port]/repo[:tag|@sha256:...], docker-archive:PATH or oci:DIR[:TAG]; a registry reference "
         f"is {REFERENCE_GRAMMAR}")


@dataclass(frozen=True)
class RegistryReference:
    host: str              # host[:port]
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        return self.digest or self.tag or "latest"

    @property
    def hostname(self) -> str:
        host = self.host
        if host.startswith("["):
            return host[1:host.index("]")]
        return host.rsplit(":", 1)[0] if host.count(":") == 1 else host

    @property
    def is_loopback(self) -> bool:
        name = self.hostname
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return f"{self.host}/{self.repository}" + (f"@{self.digest}" if self.digest else f":{self.reference}")


@dataclass(frozen=True)
class ArchiveReference:
    path: str

    def __str__(self) -> str:
        return f"docker-archive:{self.path}"


@dataclass(frozen=True)
class LayoutReference:
    path: str
    tag: str | None = None

    def __str__(self) -> str:
        return f"oci:{self.path}" + (f":{self.tag}" if self.tag else "")


ImageReference = RegistryReference | ArchiveReference | LayoutReference


def parse_reference(text: str) -> ImageReference:
    text = (text or "").strip()
    if text_problem(text):
        raise ImageReadError(f"not an image reference: {text_problem(text)}", _HINT, where=repr(text))
    if text.startswith("docker-archive:"):
        path = text[len("docker-archive:"):]
        if not path:
            raise ImageReadError(f"{text!r} names no file", _HINT, where=text)
        return ArchiveReference(path)
    if text.startswith("oci:"):
        rest = text[len("oci:"):]
        path, _, tag = rest.rpartition(":") if ":" in rest else (rest, "", "")
        if not path:
            raise ImageReadError(f"{text!r} names no directory", _HINT, where=text)
        return LayoutReference(path, tag or None)
    if text.startswith("docker://"):
        text = text[len("docker://"):]
    if text.startswith(("/", ".", "~")):   # a path, never a registry: say which prefix reads one
        raise ImageReadError(f"{text!r} is not an image reference: a registry reference is {REFERENCE_GRAMMAR}",
                             f"for a directory in OCI layout write oci:{text}, for a `docker save` file "
                             f"docker-archive:{text}", where=text)
    try:
        parts = split_image_name(text)
    except ValueError as exc:
        raise ImageReadError(f"{text!r} is not an image reference: {exc}", _HINT, where=text) from None
    if parts.digest is not None and not re.fullmatch(r"sha256:[0-9a-f]{64}", parts.digest):
        raise ImageReadError(f"{text!r}: {parts.digest!r} is not a sha256 digest (the digest infra verifies)",
                             _HINT, where=text)
    return RegistryReference(parts.host, parts.repository, parts.tag, parts.digest)


def _names_a_registry(text: str) -> bool:
    """Whether `text` says which registry (docker://, or a first component that is a host as Docker reads one:
    with a '.' or a ':', or localhost): then it is a registry reference whatever this machine's files are."""
    if text.startswith("docker://"):
        return True
    first, slash, _ = text.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost") and not text.startswith((".", "/"))


def _local_kind(path: str) -> str | None:
    """'layout' for a directory in OCI layout (index.json or oci-layout in it), 'file' for a regular file; links
    followed, as `oci:`/`docker-archive:` would follow them. Nothing is opened (a FIFO is neither)."""
    try:
        if os.path.isdir(path):
            marks = (os.path.join(path, "index.json"), os.path.join(path, "oci-layout"))
            return "layout" if any(os.path.isfile(m) for m in marks) else None
        return "file" if os.path.isfile(path) else None
    except (OSError, ValueError):      # a name too long for the file system, a NUL (text_problem refuses those first)
        return None


def refuse_local_path(text: str) -> None:
    """`infra image check build/mpi` with `oci:` forgotten: where IMAGE names no registry (no host, no
    docker://) and is a local OCI layout (DIR or DIR:TAG) or a file, raise the did-you-mean (exit 2) before
    anything reaches the network, rather than ask Docker Hub for `library/...` of that name. A name that
    says its registry is a registry reference even where a folder of that name exists; a folder that is not
    an OCI layout does not stop a registry name (a folder `ubuntu` beside `ubuntu:22.04`)."""
    text = (text or "").strip()
    if text_problem(text) or text.startswith(("docker-archive:", "oci:")) or _names_a_registry(text):
        return
    hub = "" if text.startswith(("/", ".", "~")) else f"; for the Docker Hub image of that name write docker.io/{text}"
    candidates: list[tuple[str, str | None]] = [(text, None)]
    head, colon, last = text.rpartition(":")
    if colon and head and "/" not in last:
        candidates.append((head, last))
    for path, tag in candidates:
        kind = _local_kind(path)
        if kind == "layout":
            raise ImageReadError(f"{path} is a local OCI layout: did you mean oci:{text}?",
                                 f"write oci:DIR[:TAG] to read a directory in OCI layout{hub}", where=text)
        if kind == "file" and tag is None:
            raise ImageReadError(f"{path} is a local file: did you mean docker-archive:{text}?",
                                 f"write docker-archive:PATH to read a `docker save` archive{hub}", where=text)
