"""validators/image_evidence.yaml: evidence profiles (openmpi, mpi, ibverbs, ...) compiled into rules.

A profile is met when one of its variants is (image/evidence.py judges them against an image's layers):
every `all` rule found, no `none` rule found; versions come from ranked sources. Compiled once here, so a
hand-edited profile fails with its line before any image is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from infra_cli.knowledge.reader import at, fault, load, mapping, sequence

FILE = "image_evidence.yaml"
HINT = "fix validators/image_evidence.yaml: see the comment at its top for the rule shapes"
DEFAULT_MAX_BYTES = 1 << 20


def glob_regex(glob: str) -> str:
    """'**/libmpi.so.*' -> a regex over absolute paths; '**' spans directories, '*' and '?' do not."""
    if glob.startswith("**/"):
        prefix, rest = "(?:/.*)?/", glob[3:]
    elif glob.startswith("/"):
        prefix, rest = "/", glob[1:]
    else:
        raise ValueError(f"glob {glob!r} must start with '/' or '**/'")
    out, i = [], 0
    while i < len(rest):
        if rest.startswith("**", i):
            out.append(".*")
            i += 2
        elif rest[i] == "*":
            out.append("[^/]*")
            i += 1
        elif rest[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(rest[i]))
            i += 1
    return prefix + "".join(out)


@dataclass(frozen=True)
class Extractor:
    id: str
    pattern: "re.Pattern[bytes]"
    max_bytes: int


@dataclass(frozen=True)
class Rule:
    label: str
    globs: tuple[str, ...] = ()          # file rule: an entry matching one of these
    on_path: tuple[str, ...] = ()        # executable rule: one of these names reachable on PATH
    on_library_path: bool = False        # report whether the file's directory is on LD_LIBRARY_PATH

    @property
    def regex(self) -> "re.Pattern[str]":
        return compiled("|".join(f"(?:{glob_regex(g)})" for g in self.globs))


@dataclass(frozen=True)
class VersionSource:
    id: str
    glob: str
    fixed_path: str | None               # a single known path: the source is closed once that path is decided
    extractor: Extractor | None = None   # version from the file's content
    path_pattern: "re.Pattern[str] | None" = None   # version from the path (or link target)
    mapping: tuple[tuple[str, str], ...] = ()

    @property
    def regex(self) -> "re.Pattern[str]":
        return compiled(glob_regex(self.glob))


@dataclass(frozen=True)
class Variant:
    name: str
    all: tuple[Rule, ...]
    none: tuple[Rule, ...] = ()
    optional: tuple[Rule, ...] = ()
    versions: tuple[VersionSource, ...] = ()


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    variants: tuple[Variant, ...]
    see_also: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


@lru_cache(maxsize=None)
def compiled(pattern: str) -> "re.Pattern[str]":
    return re.compile(f"^(?:{pattern})$")


def _rule(data: Any) -> Rule:
    if not isinstance(data, dict) or not (("file" in data) ^ ("on_path" in data)):
        raise fault("a rule needs exactly one of `file: [GLOB...]` or `on_path: [NAME...]`")
    globs = tuple(sequence(data.get("file"), "file"))
    for g in globs:
        glob_regex(g)
    names = tuple(sequence(data.get("on_path"), "on_path"))
    label = data.get("label") or (f"{' or '.join(names)} on PATH" if names else " or ".join(globs))
    return Rule(label, globs, names, bool(data.get("on_library_path")))


def _dpkg_pattern(packages: Iterable[str]) -> str:
    names = "|".join(re.escape(p) for p in packages)
    return rf"(?m)^Package: (?:{names})\nStatus: install ok installed\n(?:[^\n]+\n)*?Version: (?:\d+:)?(\S+)"


def _version_source(key: str, data: Any) -> VersionSource:
    """`key` (the source's place in the file) prefixes the extractor's id: ids like `dpkg` repeat across
    profiles."""
    data = mapping(data, "a version source")
    if "id" not in data or "file" not in data:
        raise fault("a version source needs `id` and `file`")
    vid, glob = str(data["id"]), str(data["file"])
    with at("file"):
        glob_regex(glob)
    fixed = glob if not any(c in glob for c in "*?") else None
    text = _dpkg_pattern(data["dpkg"]) if "dpkg" in data else data.get("regex")
    extractor = path_pattern = None
    if text:
        extractor = Extractor(f"{key}.{vid}", re.compile(text.encode()), int(data.get("max_bytes", DEFAULT_MAX_BYTES)))
    if data.get("path_regex"):
        with at("path_regex"):
            path_pattern = re.compile(data["path_regex"])
    if (extractor is None) == (path_pattern is None):
        raise fault("a version source needs exactly one of `regex`, `dpkg` or `path_regex`")
    pairs = tuple((str(k), str(v)) for k, v in mapping(data.get("map") or {}, "map").items())
    return VersionSource(vid, glob, fixed, extractor, path_pattern, pairs)


def _rules(variant: dict, kind: str) -> tuple[Rule, ...]:
    out = []
    for i, r in enumerate(sequence(variant.get(kind), kind)):
        with at(kind, i):
            out.append(_rule(r))
    return tuple(out)


def _profiles(data: Any) -> dict[str, Profile]:
    profiles = {}
    for name, row in mapping(mapping(data or {}, FILE).get("profiles") or {}, "profiles").items():
        with at("profiles", name):
            row = mapping(row, "a profile")
            variants = []
            for i, v in enumerate(sequence(row.get("variants"), "variants")):
                with at("variants", i):
                    v = mapping(v, "a variant")
                    key = f"profiles.{name}.variants[{i}].versions"
                    versions = []
                    for j, s in enumerate(sequence(v.get("versions"), "versions")):
                        with at("versions", j):
                            versions.append(_version_source(key, s))
                    variant = Variant(str(v.get("name") or name), _rules(v, "all"), _rules(v, "none"),
                                      _rules(v, "optional"), tuple(versions))
                    if not variant.all:
                        raise fault("a variant needs at least one `all` rule")
                    variants.append(variant)
            if not variants:
                raise fault("a profile needs at least one variant")
            profiles[str(name)] = Profile(str(name), str(row.get("description", "")), tuple(variants),
                                          tuple(sequence(row.get("see_also"), "see_also")),
                                          tuple(sequence(row.get("sources"), "sources")))
    return profiles


def profiles() -> dict[str, Profile]:
    return load(FILE, _profiles, hint=HINT)


def known_capabilities() -> tuple[str, ...]:
    """The names `--require` and a stack's `requires:` accept."""
    return tuple(profiles())
