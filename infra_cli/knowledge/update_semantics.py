"""validators/update_semantics.yaml: what Azure ML changes in place, what forces a replacement, which
provisioning states taint a cluster, which errors an apply tries again, what makes an environment's content.

An attribute listed under neither `in_place` nor `force_replacement` forces a replacement: a field infra
does not know Azure can change in place is never sent as a silent update (docs/ARCHITECTURE.md, "a cluster
field"). A test holds every attribute the plan produces to being listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterator

from infra_cli.knowledge.reader import at, fault, load, mapping, sequence

FILE = "update_semantics.yaml"
HINT = ("fix validators/update_semantics.yaml: cluster has in_place (a list) and force_replacement "
        "(attribute: why); environment.content, cluster_provisioning and transient_errors as in the packaged file")


class ReplacementReasons(Mapping):
    """attribute -> why changing it forces a replacement. Listed attributes iterate; an attribute that is
    not listed in place is also `in` it (with a reason saying it is unclassified): unknown means replace."""

    def __init__(self, listed: dict[str, str], in_place: frozenset[str], resource_type: str):
        self._listed = listed
        self._in_place = in_place
        self._type = resource_type

    @property
    def listed(self) -> dict[str, str]:
        """The file's own rows."""
        return dict(self._listed)

    def __getitem__(self, attribute: str) -> str:
        if attribute in self._listed:
            return self._listed[attribute]
        if attribute in self._in_place:
            raise KeyError(attribute)
        return (f"{attribute} is not classified in validators/update_semantics.yaml ({self._type}.in_place or "
                f"{self._type}.force_replacement), so it is replaced rather than updated blindly")

    def __contains__(self, attribute: object) -> bool:
        return attribute in self._listed or (isinstance(attribute, str) and attribute not in self._in_place)

    def __iter__(self) -> Iterator[str]:
        return iter(self._listed)

    def __len__(self) -> int:
        return len(self._listed)


@dataclass(frozen=True)
class UpdateSemantics:
    in_place: frozenset[str]
    force_replacement: ReplacementReasons  # attribute -> why it forces replacement (unlisted ones too)

    def classified(self, attribute: str) -> bool:
        """Listed in the file, one way or the other."""
        return attribute in self.in_place or attribute in self.force_replacement.listed


@dataclass(frozen=True)
class ProvisioningRules:
    replace: dict[str, str]         # provisioningState -> why a cluster in it is replaced
    stuck_after_s: dict[str, float]  # provisioningState -> seconds after which it is taken as stuck


@dataclass(frozen=True)
class TransientErrors:
    http_status: frozenset[int]
    codes: frozenset[str]
    max_attempts: int


@dataclass(frozen=True)
class Knowledge:
    resources: dict[str, UpdateSemantics]
    provisioning: ProvisioningRules
    transient: TransientErrors
    environment_content: tuple[str, ...]


def _semantics(resource_type: str, row: Any) -> UpdateSemantics:
    row = mapping(row, resource_type)
    with at("in_place"):
        in_place = frozenset(str(a) for a in sequence(row.get("in_place"), "in_place"))
    with at("force_replacement"):
        forcing = {str(k): str(v) for k, v in mapping(row.get("force_replacement") or {}, "force_replacement").items()}
    both = sorted(in_place & set(forcing))
    if both:
        raise fault(f"{', '.join(both)} listed both in_place and under force_replacement: choose one", "in_place")
    return UpdateSemantics(in_place, ReplacementReasons(forcing, in_place, resource_type))


def _knowledge(data: Any) -> Knowledge:
    data = mapping(data, FILE)
    with at("cluster"):
        resources = {"cluster": _semantics("cluster", data["cluster"])}
    with at("cluster_provisioning"):
        row = mapping(data["cluster_provisioning"], "cluster_provisioning")
        provisioning = ProvisioningRules({str(k): str(v) for k, v in (row.get("replace") or {}).items()},
                                         {str(k): float(v) for k, v in (row.get("stuck_after_s") or {}).items()})
    with at("transient_errors"):
        row = mapping(data["transient_errors"], "transient_errors")
        transient = TransientErrors(frozenset(int(s) for s in row["http_status"]),
                                    frozenset(str(c) for c in row["codes"]), int(row["max_attempts"]))
    with at("environment", "content"):
        content = tuple(str(f) for f in sequence(mapping(data["environment"], "environment")["content"],
                                                  "environment.content"))
    return Knowledge(resources, provisioning, transient, content)


def _read() -> Knowledge:
    return load(FILE, _knowledge, hint=HINT)


def semantics(resource_type: str) -> UpdateSemantics:
    return _read().resources[resource_type]


def provisioning_rules() -> ProvisioningRules:
    return _read().provisioning


def transient_errors() -> TransientErrors:
    return _read().transient


def environment_content_fields() -> tuple[str, ...]:
    return _read().environment_content
