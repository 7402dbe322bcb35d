"""validators/base_images.yaml: what base images, apt packages and pip packages provide to a Dockerfile's RUN
steps, and what commands and pip packages need (read by validate/build_steps.py, which judges the steps).

Every capability a row names must be declared under `capabilities:` (with how a Dockerfile gets it), so a typo
in a hand-edited row is a `knowledge.invalid` diagnostic at its line, never a requirement nothing can meet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from infra_cli.knowledge.reader import at, fault, load, mapping, sequence

FILE = "base_images.yaml"
HINT = ("fix validators/base_images.yaml: capabilities need `what` and `fix`; bases need name, pattern (a regular "
        "expression), provides and sources (others: absent or unknown); every capability a row names must be declared under capabilities")


@dataclass(frozen=True)
class Capability:
    name: str
    what: str
    fix: str


@dataclass(frozen=True)
class BaseImage:
    name: str
    pattern: "re.Pattern[str]"
    provides: frozenset[str]
    note: str
    sources: tuple[str, ...]
    others_unknown: bool = False        # `others: unknown`: a system capability not listed is unknown, not absent


@dataclass(frozen=True)
class AptPackage:
    provides: frozenset[str]
    with_recommends: frozenset[str]      # added unless --no-install-recommends


@dataclass(frozen=True)
class PipPackage:
    needs_first: frozenset[str]          # each present before the pip command starts
    needs_first_any: frozenset[str]      # one of them present before the pip command starts
    needs_to_build: frozenset[str]       # present before the command, when pip builds it from source
    wheels_since: tuple[int, ...] | None  # binary wheels from this version on; None: built from source always
    built_always: bool                   # `wheels_since: null` given: no wheel at all
    provides: frozenset[str]
    source: str


@dataclass(frozen=True)
class BuildKnowledge:
    capabilities: dict[str, Capability]
    bases: tuple[BaseImage, ...]
    commands: dict[str, frozenset[str]]
    apt_packages: dict[str, AptPackage]
    pip_packages: dict[str, PipPackage]

    def base(self, reference: str) -> BaseImage | None:
        """The first family whose pattern matches the FROM reference (None: an unknown base)."""
        return next((b for b in self.bases if b.pattern.search(reference)), None)


def _version(text: Any) -> tuple[int, ...]:
    parts = tuple(int(p) for p in re.findall(r"\d+", str(text)))
    if not parts:
        raise ValueError(f"wheels_since must be a version such as \"4.1.0\" or null, not {text!r}")
    return parts


def _table(data: Any) -> BuildKnowledge:
    data = mapping(data, FILE)
    capabilities: dict[str, Capability] = {}
    for name, row in mapping(data["capabilities"], "capabilities").items():
        with at("capabilities", name):
            row = mapping(row, "a capability")
            capabilities[str(name)] = Capability(str(name), str(row["what"]), str(row["fix"]))

    def names(value: Any, what: str) -> frozenset[str]:
        out = frozenset(str(v) for v in sequence(value, what))
        unknown = sorted(out - capabilities.keys())
        if unknown:
            raise fault(f"{what} names undeclared capabilit{'y' if len(unknown) == 1 else 'ies'} "
                        f"{', '.join(unknown)} (declared: {', '.join(capabilities)})")
        return out

    def field(row: dict, key: str) -> frozenset[str]:
        with at(key):
            return names(row.get(key), key)

    bases = []
    for i, row in enumerate(sequence(data["bases"], "bases")):
        with at("bases", i):
            row = mapping(row, "a base image row")
            sources = tuple(str(s) for s in sequence(row["sources"], "sources"))
            if not sources:
                raise fault("a base image row needs at least one source URL", "sources")
            provides = field(row, "provides")
            with at("pattern"):
                pattern = re.compile(str(row["pattern"]))
            others = str(row.get("others", "absent"))
            if others not in ("absent", "unknown"):
                raise fault(f"others must be `absent` (the default) or `unknown`, not {others!r}", "others")
            bases.append(BaseImage(str(row["name"]), pattern, provides, str(row.get("note") or ""), sources,
                                   others == "unknown"))
    commands = {}
    for name, needs in mapping(data["commands"], "commands").items():
        with at("commands", name):
            commands[str(name)] = names(needs, f"command {name}")
    apt = {}
    for name, row in mapping(data["apt_packages"], "apt_packages").items():
        with at("apt_packages", name):
            row = mapping(row, "an apt package")
            apt[str(name)] = AptPackage(field(row, "provides"), field(row, "with_recommends"))
    pip = {}
    for name, row in mapping(data["pip_packages"], "pip_packages").items():
        with at("pip_packages", name):
            row = mapping(row, "a pip package")
            if "wheels_since" in row and row["wheels_since"] is not None:
                with at("wheels_since"):
                    since = _version(row["wheels_since"])
            else:
                since = None
            built_always = "wheels_since" in row and row["wheels_since"] is None
            pip[str(name)] = PipPackage(
                field(row, "needs_first"), field(row, "needs_first_any"), field(row, "needs_to_build"), since,
                built_always, field(row, "provides") | ({str(name)} & capabilities.keys()), str(row["source"]))
    return BuildKnowledge(capabilities, tuple(bases), commands, apt, pip)


def build_knowledge() -> BuildKnowledge:
    return load(FILE, _table, hint=HINT)
