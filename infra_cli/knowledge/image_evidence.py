"""validators/image_evidence.yaml: evidence profiles (openmpi, mpi, ibverbs, ...) compiled into rules.

A profile is met when one of its variants is (image/evidence.py judges them against an image's layers):
every `all` rule found, no `none` rule found; versions come from ranked sources. Compiled once here, so a
hand-edited profile fails with its line before any image is read.

A profile's `fix:` says what to do when it is not met (image/fix.py): base images that carry it, the install
command per distribution family (`distributions:`, matched against the image's os-release), and the Dockerfile
template that provides it (checked here against templates/docker/NAME/template.yaml's `provides:`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from infra_cli.knowledge.docker_templates import template_meta, template_name_problem
from infra_cli.knowledge.grammars import image_reference_problem, text_problem
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
class BaseImage:
    image: str
    source: str
    version: str | None = None           # the profile's version it carries (a requirement's version is held to it)
    note: str = ""


@dataclass(frozen=True)
class Install:
    run: str                             # the command (a Dockerfile RUN line's)
    source: str
    note: str = ""


@dataclass(frozen=True)
class Fix:
    base_images: tuple[BaseImage, ...] = ()
    install: tuple[tuple[str, Install], ...] = ()       # (family or "any", how), in the file's order
    template: str | None = None                         # templates/docker/NAME
    template_version: str | None = None                 # the version its template.yaml provides (None: any)
    template_parameters: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Family:
    name: str                            # the family's key: debian, rhel
    title: str                           # Debian/Ubuntu
    ids: tuple[str, ...]                 # os-release ID / ID_LIKE values


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    variants: tuple[Variant, ...]
    see_also: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    fix: Fix | None = None


@dataclass(frozen=True)
class Evidence:
    profiles: dict[str, Profile]
    families: tuple[Family, ...]


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


def _text(value: Any, what: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip() or text_problem(value):
        problem = text_problem(value)
        raise fault(f"{what} must be one line of text" + (f" ({problem})" if problem else ""), what)
    return value


def _source(value: Any) -> str:
    text = _text(value, "source")
    if not text.startswith("https://"):
        raise fault(f"source {text!r} must be a public https:// URL (users have no other copy of what it cites)",
                    "source")
    return text


def _families(data: Any) -> tuple[Family, ...]:
    families = []
    for key, row in mapping(data or {}, "distributions").items():
        with at("distributions", key):
            row = mapping(row, "a distribution family")
            ids = tuple(str(i) for i in sequence(row.get("ids"), "ids"))
            if not ids:
                raise fault("a distribution family needs `ids:` (os-release ID values)", "ids")
            families.append(Family(str(key), _text(row.get("name"), "name"), ids))
    return tuple(families)


def _template(data: Any, profile: str) -> tuple[str, str | None, tuple]:
    """`template: {name, parameters}`: a template of templates/docker whose template.yaml `provides:` the profile
    (or, given parameters, declares each of them). Returns (name, the version it provides, parameters)."""
    data = mapping(data, "template")
    name = data.get("name")
    meta = template_meta(name) if template_name_problem(name) is None else None
    if meta is None:
        raise fault(f"no Dockerfile template {name!r} (a folder of templates/docker/ with a template.yaml)", "name")
    parameters = mapping(data.get("parameters") or {}, "parameters")
    declared = meta.get("parameters") or {}
    unknown = [p for p in parameters if p not in declared]
    if unknown:
        raise fault(f"template {name} has no parameter {unknown[0]!r} (its template.yaml declares "
                    f"{', '.join(declared) or 'none'})", "parameters")
    provided = {}
    for spec in meta.get("provides") or []:
        req_name, _, version = str(spec).partition(">=")
        provided[req_name.strip()] = version.strip() or None
    if profile not in provided and not parameters:
        raise fault(f"template {name} does not provide {profile} (its template.yaml provides: "
                    f"{', '.join(provided) or 'nothing'}); name the parameters that make it do so", "name")
    return str(name), provided.get(profile), tuple(parameters.items())


def _fix(data: Any, profile: str, families: tuple[Family, ...]) -> Fix:
    data = mapping(data, "fix")
    unknown = set(data) - {"base_images", "install", "template"}
    if unknown:
        raise fault(f"unknown key {sorted(unknown)[0]!r} (fix: takes base_images, install, template)")
    images = []
    for i, row in enumerate(sequence(data.get("base_images"), "base_images")):
        with at("base_images", i):
            row = mapping(row, "a base image")
            problem = image_reference_problem(row.get("image"))
            if problem:
                raise fault(problem, "image")
            version = row.get("version")
            images.append(BaseImage(row["image"], _source(row.get("source")),
                                    None if version is None else _text(str(version), "version"),
                                    _text(row.get("note"), "note", required=False)))
    install = []
    known = {f.name for f in families} | {"any"}
    for family, row in mapping(data.get("install") or {}, "install").items():
        with at("install", family):
            if family not in known:
                raise fault(f"unknown distribution family {family!r}: use one of `distributions:` "
                            f"({', '.join(sorted(known - {'any'}))}) or `any`")
            row = mapping(row, "an install entry")
            install.append((str(family), Install(_text(row.get("run"), "run"), _source(row.get("source")),
                                                 _text(row.get("note"), "note", required=False))))
    template = version = None
    parameters: tuple = ()
    if data.get("template") is not None:
        with at("template"):
            template, version, parameters = _template(data["template"], profile)
    if not (images or install or template):
        raise fault("a fix needs at least one of base_images, install or template")
    return Fix(tuple(images), tuple(install), template, version, parameters)


def _evidence(data: Any) -> Evidence:
    data = mapping(data or {}, FILE)
    families = _families(data.get("distributions"))
    return Evidence(_profiles(data, families), families)


def _profiles(data: dict, families: tuple[Family, ...]) -> dict[str, Profile]:
    profiles = {}
    for name, row in mapping(data.get("profiles") or {}, "profiles").items():
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
            fix = None
            if row.get("fix") is not None:
                with at("fix"):
                    fix = _fix(row["fix"], str(name), families)
            profiles[str(name)] = Profile(str(name), str(row.get("description", "")), tuple(variants),
                                          tuple(sequence(row.get("see_also"), "see_also")),
                                          tuple(sequence(row.get("sources"), "sources")), fix)
    return profiles


def evidence() -> Evidence:
    return load(FILE, _evidence, hint=HINT)


def profiles() -> dict[str, Profile]:
    return evidence().profiles


def families() -> tuple[Family, ...]:
    """The distribution families `fix:` install commands are written for (`distributions:`)."""
    return evidence().families


def known_capabilities() -> tuple[str, ...]:
    """The names `--require` and a stack's `requires:` accept."""
    return tuple(profiles())
