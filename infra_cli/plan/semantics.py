"""Azure ML's update rules, read from validators/update_semantics.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import yaml

from infra_cli.paths import validators_dir


@dataclass(frozen=True)
class UpdateSemantics:
    in_place: frozenset[str]
    force_replacement: dict[str, str]  # attribute -> why it forces replacement


@lru_cache(maxsize=1)
def _load() -> dict:
    with open(validators_dir() / "update_semantics.yaml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def semantics(resource_type: str) -> UpdateSemantics:
    row = _load()[resource_type]
    return UpdateSemantics(frozenset(row.get("in_place") or ()), dict(row.get("force_replacement") or {}))


def environment_content_fields() -> tuple[str, ...]:
    return tuple(_load()["environment"]["content"])
