"""From a root manifest (or index) to the image: platform selection, config, layers; one flow for every source."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from infra_cli.image.blob import Descriptor, verify_bytes
from infra_cli.image.errors import ImageReadError

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = ("application/vnd.docker.distribution.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v1+prettyjws")
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
MAX_MANIFEST_BYTES = 4 << 20
DEFAULT_PLATFORM = "linux/amd64"


class ImageStore(Protocol):
    """What a source (registry, docker-archive, OCI layout) offers the reader."""

    description: str

    def root(self) -> tuple[bytes, str, str | None]:
        """(root manifest or index bytes, media type if known, digest if known)."""

    def manifest(self, digest: str) -> tuple[bytes, str]:
        """A manifest named by an index: (bytes, media type if known)."""

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        """The raw blob stream; the caller verifies it against desc.digest."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class ResolvedImage:
    digest: str | None           # of the (platform's) manifest
    media_type: str
    platform: str
    config: dict
    layers: tuple[Descriptor, ...]

    @property
    def env(self) -> dict[str, str]:
        out = {}
        for item in (self.config.get("config") or {}).get("Env") or []:
            key, _, value = str(item).partition("=")
            out[key] = value
        return out


def parse_platform(text: str) -> tuple[str, str, str | None]:
    parts = (text or DEFAULT_PLATFORM).split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ImageReadError(f"--platform {text!r} is not OS/ARCH[/VARIANT]", "e.g. --platform linux/amd64")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def _json(data: bytes, what: str) -> dict:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ImageReadError(f"{what} is not JSON ({exc})", "the image metadata is corrupt; push or save it again") from None
    if not isinstance(doc, dict):
        raise ImageReadError(f"{what} is not a JSON object", "the image metadata is corrupt; push or save it again")
    return doc


def _media_type(doc: dict, declared: str) -> str:
    kind = doc.get("mediaType") or declared.split(";")[0].strip()
    if not kind:  # OCI allows leaving it out: tell by shape
        kind = OCI_INDEX if "manifests" in doc else OCI_MANIFEST if "layers" in doc else ""
    return kind


def _pick(doc: dict, platform: str) -> Descriptor:
    want_os, want_arch, want_variant = parse_platform(platform)
    offered = []
    for item in doc.get("manifests") or []:
        desc = Descriptor.from_json(item)
        p = desc.platform
        offered.append("/".join(x for x in (p.get("os"), p.get("architecture"), p.get("variant")) if x) or "unknown")
        if p.get("os") == want_os and p.get("architecture") == want_arch and (
                want_variant is None or p.get("variant") == want_variant):
            return desc
    raise ImageReadError(f"the image index has no manifest for {platform}; it offers: {', '.join(offered) or 'nothing'}",
                         "pick one with --platform OS/ARCH")


def resolve(store: ImageStore, platform: str = DEFAULT_PLATFORM) -> ResolvedImage:
    data, declared, digest = store.root()
    if digest:
        verify_bytes(data, digest, "manifest")
    doc = _json(data, "the manifest")
    kind = _media_type(doc, declared)
    if kind in INDEX_TYPES:
        chosen = _pick(doc, platform)
        data, declared = store.manifest(chosen.digest)
        verify_bytes(data, chosen.digest, "manifest")
        digest, doc = chosen.digest, _json(data, f"manifest {chosen.digest}")
        kind = _media_type(doc, declared or chosen.media_type)
    if kind in DOCKER_SCHEMA1 or doc.get("schemaVersion") == 1:
        raise ImageReadError("the image uses Docker manifest schema 1, which has no config blob",
                             "re-push the image with a current docker/buildah/skopeo (schema 2 or OCI)")
    if kind not in MANIFEST_TYPES:
        raise ImageReadError(f"unsupported manifest media type {kind!r}",
                             "expected an OCI or Docker schema 2 image manifest (or an index of them)")
    config_desc = Descriptor.from_json(doc.get("config") or {})
    config_bytes = store.open_blob(config_desc).read(MAX_MANIFEST_BYTES + 1)
    verify_bytes(config_bytes, config_desc.digest, "config")
    config = _json(config_bytes, f"config {config_desc.digest}")
    layers = tuple(Descriptor.from_json(item) for item in doc.get("layers") or [])
    os_arch = "/".join(x for x in (config.get("os"), config.get("architecture"), config.get("variant")) if x)
    return ResolvedImage(digest, kind, os_arch or platform, config, layers)
