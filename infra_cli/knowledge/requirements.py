"""Requirement specs: `openmpi>=4.1`, `mpi`, `ibverbs`, `nccl>=2.18`.

Used both by `infra image check --require` and by stack environments' `requires:`; the capability names
are the profiles of validators/image_evidence.yaml.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from infra_cli.knowledge.image_evidence import known_capabilities

# Matched whole against the stripped text: a `\s*` at each end beside the one after the name would try every split
# of a run of blanks between them (quadratic: 20,000 blanks took 2.6 s).
_SPEC = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)\s*(?:(>=|<=|==|!=|>|<)\s*([0-9][0-9A-Za-z.\-]*))?")


class SpecError(ValueError):
    pass


def parse_version(text: str) -> tuple[int, ...]:
    """'4.1.0a1' -> (4, 1, 0): numeric components only, enough to order MPI/NCCL releases."""
    parts = []
    for piece in text.split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def version_satisfies(found: str, op: str, wanted: str) -> bool:
    a, b = parse_version(found), parse_version(wanted)
    # compare on the wanted precision: "4.1" matches 4.1.x for == and >=
    a = a[: len(b)] if op in ("==", "!=") else a
    width = max(len(a), len(b))
    a += (0,) * (width - len(a))
    b += (0,) * (width - len(b))
    return {
        ">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b, ">": a > b, "<": a < b,
    }[op]


@dataclass(frozen=True)
class Requirement:
    name: str
    op: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.version}" if self.op else self.name

    def met_by(self, found_version: str | None) -> bool:
        """Whether a capability found with `found_version` (None: version unknown) satisfies this."""
        if self.op is None:
            return True
        if found_version is None:
            return False
        return version_satisfies(found_version, self.op, self.version or "")


def parse_requirement(text: str) -> Requirement:
    m = _SPEC.fullmatch((text or "").strip()) if isinstance(text, str) or not text else None
    if not m:
        shown = repr(text) if len(repr(text)) <= 80 else f"{repr(text)[:60]}... ({len(text)} characters)"
        raise SpecError(f"{shown} is not a requirement spec; write NAME or NAME>=VERSION, e.g. openmpi>=4.1")
    name, op, version = m.group(1).lower(), m.group(2), m.group(3)
    known = known_capabilities()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpecError(f"unknown capability {name!r}{hint}; known: {', '.join(known)}")
    if op and not parse_version(version):
        raise SpecError(f"{text!r}: version {version!r} has no numeric part")
    return Requirement(name, op, version)
