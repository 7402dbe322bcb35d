"""What to do about a requirement an image does not meet, for that image's distribution.

The knowledge is validators/image_evidence.yaml's `fix:` blocks (base images that carry the profile, the install
command per distribution family, the Dockerfile template that provides it). The distribution is the image's own
os-release (https://www.freedesktop.org/software/systemd/man/latest/os-release.html: /etc/os-release, else
/usr/lib/os-release), read from the merged layers as a version source is: its ID, ID_LIKE and VERSION_ID,
each held to os-release's grammar for them (lower-case letters, digits, '.', '_', '-'), so what a hostile image
writes there reaches no output but a short plain word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infra_cli.image.merged_filesystem import MergedView, State
from infra_cli.knowledge.image_evidence import Extractor, Family, Fix
from infra_cli.knowledge.requirements import Requirement

OS_RELEASE_FILES = ("/etc/os-release", "/usr/lib/os-release")   # os-release(5)'s order
_MAX_BYTES = 16384
_WORD = rb"[a-z0-9][a-z0-9._-]{0,39}"
# ID="ubuntu", ID_LIKE="rhel centos fedora", VERSION_ID="22.04": quoted or not, one line
OS_RELEASE_EXTRACTORS = tuple(
    Extractor(f"os-release.{key}", re.compile(pattern), _MAX_BYTES) for key, pattern in (
        ("id", rb"(?m)^ID=[\"']?(" + _WORD + rb")[\"']?[ \t]*$"),
        ("id_like", rb"(?m)^ID_LIKE=[\"']?(" + _WORD + rb"(?: " + _WORD + rb"){0,7})[\"']?[ \t]*$"),
        ("version_id", rb"(?m)^VERSION_ID=[\"']?([A-Za-z0-9][A-Za-z0-9._~-]{0,39})[\"']?[ \t]*$"),
    ))
OS_RELEASE_SOURCES = tuple((path, e) for path in OS_RELEASE_FILES for e in OS_RELEASE_EXTRACTORS)


@dataclass(frozen=True)
class Distribution:
    """The image's os-release: where it was read, ID, ID_LIKE and VERSION_ID, and the family they name."""
    path: str
    id: str | None
    id_like: tuple[str, ...]
    version_id: str | None
    family: Family | None

    @property
    def title(self) -> str:
        """`ubuntu 22.04`; the family where the ID is not one of its own (`linuxmint 21 (Debian, Ubuntu)`)."""
        name = " ".join(p for p in (self.id, self.version_id) if p) if self.id else "an os-release without ID"
        return f"{name} ({self.family.title})" if self.family and self.id not in self.family.ids else name

    def to_json(self) -> dict:
        return {"path": self.path, "id": self.id, "id_like": list(self.id_like), "version_id": self.version_id,
                "family": self.family.name if self.family else None}


def _family(ids: list[str], families: tuple[Family, ...]) -> Family | None:
    """ID first, then ID_LIKE in its order (os-release(5): the closest relative first)."""
    for value in ids:
        for family in families:
            if value in family.ids:
                return family
    return None


def os_release_state(view: MergedView) -> State:
    """FOUND: an os-release was read (or every layer was and there is none: ABSENT); UNKNOWN: a lower layer
    not read yet may still hold it."""
    for path in OS_RELEASE_FILES:
        hit, _ = view.resolve(path)
        if hit.state is State.FOUND and hit.kind != "dir":
            return State.FOUND
        if hit.state is State.UNKNOWN:
            return State.UNKNOWN
    return State.ABSENT


def read_distribution(view: MergedView, families: tuple[Family, ...]) -> Distribution | None:
    """The image's os-release as the merged file system shows it (links followed, as a reader of
    /etc/os-release would), or None where the layers read hold none."""
    for path in OS_RELEASE_FILES:
        hit, _ = view.resolve(path)
        if hit.state is not State.FOUND or hit.layer is None or hit.kind == "dir":
            continue
        candidate = hit.layer.candidates.get(hit.path)
        if candidate is None:      # a link to a file no extractor read (not an os-release path)
            continue
        got = {e.id.split(".", 1)[1]: candidate.captures.get(e.id) for e in OS_RELEASE_EXTRACTORS}
        id_like = tuple((got["id_like"] or "").split())
        ids = [got["id"]] if got["id"] else []
        return Distribution(path, got["id"], id_like, got["version_id"], _family(ids + list(id_like), families))
    return None


def fix_for(requirement: Requirement, fix: Fix | None, distribution: Distribution | None,
            families: tuple[Family, ...]) -> dict | None:
    """What to do about `requirement`, not met in an image of `distribution` (None: unknown): JSON-ready.

    `install` is the command for the image's family (or a family-independent one); where the family is unknown,
    None, and `install_by_family` lists every family's (always there). Base images and the template are named only
    where the version they carry meets the requirement's."""
    if fix is None:
        return None
    by_family = {family: how for family, how in fix.install}
    family = distribution.family.name if distribution and distribution.family else None
    install_family = "any" if "any" in by_family else family if family in by_family else None
    chosen = by_family.get(install_family) if install_family else None
    titles = {f.name: f.title for f in families} | {"any": "any distribution"}

    def meets(version: str | None) -> bool:
        return requirement.op is None or version is None or requirement.met_by(version)

    images = [b for b in fix.base_images if meets(b.version)]
    template = fix.template if fix.template and meets(fix.template_version) else None
    sources = list(dict.fromkeys([*(b.source for b in images), *(how.source for how in by_family.values())]))
    return {
        "base_images": [b.image for b in images],
        "base_image_notes": {b.image: b.note for b in images if b.note},
        "install": chosen.run if chosen else None,
        "install_note": chosen.note or None if chosen else None,
        "distribution": distribution.title if distribution and distribution.id else None,
        "family": family,
        "install_family": install_family,
        "install_by_family": {key: {"name": titles.get(key, key), "run": how.run, "note": how.note or None}
                              for key, how in by_family.items()},
        "template": template,
        "template_parameters": dict(fix.template_parameters) if template else {},
        "sources": sources,
    }
