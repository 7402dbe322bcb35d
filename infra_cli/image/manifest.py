"""From a root manifest (or index) to the image: platform selection, config, layers; one flow for every source."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from infra_cli.image.blob import BlobStream, Descriptor, check_digest_syntax, read_capped, verify_bytes
from infra_cli.image.strict_json import (list_of_strings, load_object, malformed, optional_list, optional_object,
                                      optional_string)
from infra_cli.image.errors import ImageReadError
from infra_cli.image.limits import MAX_DOCUMENT_BYTES

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = ("application/vnd.docker.distribution.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v1+prettyjws")
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
DEFAULT_PLATFORM = "linux/amd64"


class ImageStore(Protocol):
    """What a source (registry, docker-archive, OCI layout) offers the reader."""

    description: str

    def root(self) -> tuple[bytes, str, str | None]:
        """(root manifest or index bytes, media type if known, digest if known)."""

    def manifest(self, digest: str) -> tuple[bytes, str]:
        """A manifest named by an index: (bytes, media type if known)."""

    def open_blob(self, desc: Descriptor) -> BlobStream:
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


_PLATFORM_PART = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
PLATFORM_HINT = "write --platform OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64/v8"


@dataclass(frozen=True)
class Platform:
    os: str
    architecture: str
    variant: str | None = None

    def __str__(self) -> str:
        return "/".join(x for x in (self.os, self.architecture, self.variant) if x)


def parse_platform(text: str) -> Platform:
    """--platform's value, lower-cased as docker reads it; anything else is refused before the image is opened
    (exit 2: the image cannot be read as asked)."""
    parts = text.strip().lower().split("/")
    if len(parts) not in (2, 3) or not all(_PLATFORM_PART.match(p) for p in parts):
        raise ImageReadError(f"--platform {text!r} is not OS/ARCH[/VARIANT], so the image cannot be read as asked",
                             PLATFORM_HINT, rule="image.platform")
    return Platform(*parts)


LINUX_AMD64 = parse_platform(DEFAULT_PLATFORM)   # what an index is read as without --platform


def platform_of(doc: dict, what: str) -> Platform | None:
    """The os/architecture/variant an index entry's platform or an image config states (None: it states none)."""
    os_name, arch = optional_string(doc, "os", what), optional_string(doc, "architecture", what)
    variant = optional_string(doc, "variant", what)
    return Platform(os_name or "", arch or "", variant or None) if os_name or arch else None


def _media_type(doc: dict, declared: str, what: str) -> str:
    kind = optional_string(doc, "mediaType", what) or declared.split(";")[0].strip()
    if not kind:  # OCI allows leaving it out: tell by shape
        kind = OCI_INDEX if "manifests" in doc else OCI_MANIFEST if "layers" in doc else ""
    return kind


def _pick(doc: dict, platform: Platform, what: str) -> Descriptor:
    offered = []
    for i, item in enumerate(optional_list(doc, "manifests", what)):
        desc = Descriptor.from_json(item, f"{what} manifests[{i}]")
        p = platform_of(desc.platform, f"{what} manifests[{i}].platform")
        offered.append(str(p) if p else "unknown")
        if p and (p.os, p.architecture) == (platform.os, platform.architecture) and (
                platform.variant is None or p.variant == platform.variant):
            return desc
    raise ImageReadError(f"the image index has no manifest for {platform}; it offers: {', '.join(offered) or 'nothing'}",
                         "pick one with --platform OS/ARCH")


def image_config(data: bytes, what: str) -> dict:
    """The config blob, with the fields the checker reads (Env, os/architecture/variant) of the right types."""
    config = load_object(data, what)
    list_of_strings(optional_object(config, "config", what), "Env", f"{what} config")
    platform_of(config, what)
    return config


def _contradicts(stated: Platform | None, requested: Platform) -> bool:
    """Whether what a config states rules out the platform asked for. Only stated fields count: configs often
    leave the variant out (arm64 means v8 unless it says otherwise), and one that states nothing proves nothing."""
    if stated is None:
        return False
    pairs = ((stated.os, requested.os), (stated.architecture, requested.architecture),
             (stated.variant, requested.variant))
    return any(have and want and have != want for have, want in pairs)


def _check_platform(config: Platform | None, requested: Platform, listed_in_index: bool) -> None:
    """Refuse an image whose config names another platform than the one asked for."""
    if not _contradicts(config, requested):
        return
    if listed_in_index:
        raise ImageReadError(f"the image index lists a manifest for {requested}, but its config says {config}",
                             "the index is wrong; rebuild and push it again")
    raise ImageReadError(f"the image has no manifest for {requested}; it offers: {config} "
                         "(a single-platform image, not a multi-arch index)",
                         f"check it with --platform {config}, or point at an index that offers {requested}")


def _blob_descriptor(data: object, what: str) -> Descriptor:
    """A config or layer descriptor, its digest checked here where the message can say which one it is."""
    desc = Descriptor.from_json(data, what)
    check_digest_syntax(desc.digest, what)
    return desc


def _read_small_blob(store: ImageStore, desc: Descriptor, what: str) -> bytes:
    """A config blob, read whole but never past its declared size or the document bound."""
    if desc.size > MAX_DOCUMENT_BYTES:
        raise malformed(what, f"its size {desc.size} is over the {MAX_DOCUMENT_BYTES >> 20} MiB bound for a config")
    stream = store.open_blob(desc)
    try:
        return read_capped(stream, desc.size if desc.size >= 0 else MAX_DOCUMENT_BYTES, f"config {desc.digest}")
    finally:
        stream.close()


def resolve(store: ImageStore, platform: Platform | None = None) -> ResolvedImage:
    """The image `platform` names (None: linux/amd64 out of an index, and a single image as it is)."""
    data, declared, digest = store.root()
    if digest:
        verify_bytes(data, digest, "manifest")
    what = f"manifest {digest}" if digest else "the manifest"
    doc = load_object(data, what)
    kind = _media_type(doc, declared, what)
    from_index = kind in INDEX_TYPES
    if from_index:
        what, wanted = (f"image index {digest}" if digest else "the image index"), platform or LINUX_AMD64
        chosen = _pick(doc, wanted, what)
        check_digest_syntax(chosen.digest, f"{what} entry for {wanted}")   # before a URL or a path holds it
        data, declared = store.manifest(chosen.digest)
        verify_bytes(data, chosen.digest, "manifest")
        digest, what = chosen.digest, f"manifest {chosen.digest}"
        doc = load_object(data, what)
        kind = _media_type(doc, declared or chosen.media_type, what)
    if kind in DOCKER_SCHEMA1 or doc.get("schemaVersion") == 1:
        raise ImageReadError("the image uses Docker manifest schema 1, which has no config blob",
                             "re-push the image with a current docker/buildah/skopeo (schema 2 or OCI)")
    if kind not in MANIFEST_TYPES:
        raise ImageReadError(f"unsupported manifest media type {kind!r}",
                             "expected an OCI or Docker schema 2 image manifest (or an index of them)")
    if doc.get("config") is None:
        raise malformed(what, "it has no config descriptor")
    config_desc = _blob_descriptor(doc["config"], f"{what} config")
    layers = tuple(_blob_descriptor(item, f"{what} layers[{i}]")
                   for i, item in enumerate(optional_list(doc, "layers", what)))
    config_bytes = verify_bytes(_read_small_blob(store, config_desc, f"{what} config"), config_desc.digest, "config")
    config = image_config(config_bytes, f"config {config_desc.digest}")
    stated = platform_of(config, "config")
    if platform is not None:
        _check_platform(stated, platform, from_index)
    return ResolvedImage(digest, kind, str(stated) if stated else str(platform or LINUX_AMD64), config, layers)
