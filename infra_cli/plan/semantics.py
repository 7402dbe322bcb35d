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


@dataclass(frozen=True)
class ProvisioningRules:
    replace: dict[str, str]         # provisioningState -> why a cluster in it is replaced
    stuck_after_s: dict[str, float]  # provisioningState -> seconds after which it is taken as stuck


def provisioning_rules() -> ProvisioningRules:
    row = _load()["cluster_provisioning"]
    return ProvisioningRules(dict(row.get("replace") or {}),
                             {k: float(v) for k, v in (row.get("stuck_after_s") or {}).items()})


@dataclass(frozen=True)
class TransientErrors:
    http_status: frozenset[int]
    codes: frozenset[str]
    max_attempts: int


def transient_errors() -> TransientErrors:
    row = _load()["transient_errors"]
    return TransientErrors(frozenset(int(s) for s in row["http_status"]), frozenset(row["codes"]),
                           int(row["max_attempts"]))


def environment_content_fields() -> tuple[str, ...]:
    return tuple(_load()["environment"]["content"])
