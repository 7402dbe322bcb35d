"""IMAGE arguments: `host[:port]/repo[:tag|@digest]`, `docker-archive:PATH`, `oci:DIR[:TAG]`."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from infra_cli.image.errors import ImageReadError

DOCKER_HUB = "registry-1.docker.io"
_REPO = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_HINT = "write host[:port]/repo[:tag|@sha256:...], docker-archive:PATH or oci:DIR[:TAG]"


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
    name, digest = (text.split("@", 1) + [None])[:2] if "@" in text else (text, None)
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        host, repository = first, rest
    else:  # Docker Hub shorthand, as docker pull reads it
        host, repository = DOCKER_HUB, name if "/" in name else f"library/{name}"
    if not _REPO.match(repository):
        raise ImageReadError(f"{text!r}: {repository!r} is not a valid repository name", _HINT, where=text)
    if tag is not None and not _TAG.match(tag):
        raise ImageReadError(f"{text!r}: {tag!r} is not a valid tag", _HINT, where=text)
    if digest is not None and not re.match(r"^sha256:[0-9a-f]{64}$", digest):
        raise ImageReadError(f"{text!r}: {digest!r} is not a sha256 digest", _HINT, where=text)
    return RegistryReference(host, repository, tag, digest)
