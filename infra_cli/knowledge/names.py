"""validators/names.yaml: the names Azure accepts (workspace, clusters, environments...) and its tag limits."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from infra_cli.knowledge.reader import at, invalid, load, mapping, path_of

FILE = "names.yaml"
HINT = ("fix validators/names.yaml: each name rule needs what, section, rule_id, pattern, rule and source; "
        "tags needs max_tags, max_name_length, max_value_length, name_forbidden_characters, reserved_prefix, "
        "infra_tags and source")


@dataclass(frozen=True)
class NameRule:
    """A name Azure accepts (validators/names.yaml): matched whole, with re.fullmatch."""

    what: str
    section: str
    field: str | None  # a key of `section` (workspace.name), or None when the section's keys are the names
    rule_id: str
    pattern: re.Pattern
    rule: str
    source: str

    def names_in(self, stack: Any) -> list[tuple[str, tuple, bool]]:
        """(name, path in the stack, whether the name is a key) of each name this rule governs in `stack`.
        `section` is a dotted path whose `*` stands for every key of a mapping (distributions.*.x)."""
        owners: list[tuple[Any, tuple]] = [(stack, ())]
        try:
            for part in self.section.split("."):
                owners = [(child, path + (key,)) for owner, path in owners
                          for key, child in (owner.items() if part == "*" else [(part, getattr(owner, part))])]
            if self.field is not None:
                return [(getattr(owner, self.field), path + (self.field,), False) for owner, path in owners]
            return [(name, path + (name,), True) for owner, path in owners for name in owner]
        except (AttributeError, TypeError):
            where = f"section {self.section!r}" + (f" with field {self.field!r}" if self.field else "")
            raise invalid(path_of(FILE), None, f"{FILE}: the name rule {self.rule_id}: {where} is not a place "
                          "in a stack that holds names", HINT) from None


@dataclass(frozen=True)
class TagLimits:
    max_tags: int
    max_name_length: int
    max_value_length: int
    name_forbidden_characters: str
    reserved_prefix: str
    infra_tags: int
    source: str


@dataclass(frozen=True)
class Names:
    rules: tuple[NameRule, ...]
    tags: TagLimits


def _names(data: Any) -> Names:
    data = mapping(data, FILE)
    rules = []
    for key, r in mapping(data["names"], "names").items():
        with at("names", key):
            r = mapping(r, "a name rule")
            rules.append(NameRule(r["what"], r["section"], r.get("field"), r["rule_id"], re.compile(r["pattern"]),
                                  r["rule"], r["source"]))
    with at("tags"):
        t = mapping(data["tags"], "tags")
        tags = TagLimits(int(t["max_tags"]), int(t["max_name_length"]), int(t["max_value_length"]),
                         str(t["name_forbidden_characters"]), str(t["reserved_prefix"]), int(t["infra_tags"]),
                         t["source"])
    return Names(tuple(rules), tags)


def _read() -> Names:
    return load(FILE, _names, hint=HINT)


def name_rules() -> tuple[NameRule, ...]:
    return _read().rules


def tag_limits() -> TagLimits:
    return _read().tags
