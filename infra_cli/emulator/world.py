"""The emulated world (world.yaml): where each catalog size (GPU/HPC and general-purpose CPU) is offered or
restricted, quota, name rules."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from infra_cli.knowledge.skus import Catalog, Sku, load_catalog

DEFAULT_WORLD = Path(__file__).with_name("world.yaml")
WORLD_ENV = "INFRA_EMULATOR_WORLD"
# libyaml parses world.yaml in ~0.6 ms against ~6 ms in pure Python, on every emulator start (every --local
# command); parsing it each time keeps an edited or INFRA_EMULATOR_WORLD file always current, with no cache to go stale
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class NameRule:
    pattern: re.Pattern
    rule: str
    source: str


@dataclass(frozen=True)
class Offer:
    sku: Sku
    restriction: str | None     # e.g. NotAvailableForSubscription; None when usable


class World:
    def __init__(self, data: dict, catalog: Catalog, source: Path):
        self.source = source
        self.catalog = catalog
        self._regions: dict[str, dict] = {k.lower(): v or {} for k, v in (data.get("regions") or {}).items()}
        quota = data.get("quota") or {}
        self._default_limit = int(quota.get("default_family_limit", 0))
        self._family_limits = {k.lower(): int(v) for k, v in (quota.get("families") or {}).items()}
        self._region_limits = {r.lower(): {k.lower(): int(v) for k, v in (fams or {}).items()}
                               for r, fams in (quota.get("regions") or {}).items()}
        self._total_limits = {"dedicated": int(quota.get("total_dedicated_limit", 4800)),
                              "lowpriority": int(quota.get("total_low_priority_limit", 960))}
        self.workspace_isolation = str((data.get("workspace") or {}).get("managed_network") or "Disabled")
        self.names = {kind: NameRule(re.compile(r["pattern"]), r["rule"], r.get("source", ""))
                      for kind, r in (data.get("names") or {}).items()}

    @property
    def regions(self) -> list[str]:
        return sorted(self._regions)

    def offers(self, region: str) -> list[Offer]:
        """Sizes offered in a region (restricted ones included, marked), in catalog order."""
        spec = self._regions.get(region.lower())
        if spec is None:
            return []
        listed = spec.get("offers", "all")
        restricted = {k.lower(): v for k, v in (spec.get("restricted") or {}).items()}
        if listed == "all":
            skus = [s for s in self.catalog if not s.retired]
        else:
            skus = [s for s in (self.catalog.get(n) for n in listed) if s is not None]
        if spec.get("general_purpose", True):  # the CPU sizes every Azure region offers, unless the file says not
            listed_names = {s.name.lower() for s in skus}
            skus += [s for s in self.catalog.general_purpose() if s.name.lower() not in listed_names]
        return [Offer(s, restricted.get(s.name.lower())) for s in skus]

    def offer(self, region: str, size: str) -> Offer | None:
        return next((o for o in self.offers(region) if o.sku.name.lower() == size.lower()), None)

    def family_limit(self, region: str, family: str) -> int:
        region_limits = self._region_limits.get(region.lower(), {})
        return region_limits.get(family.lower(), self._family_limits.get(family.lower(), self._default_limit))

    def total_limit(self, region: str, priority: str) -> int:
        """The region's Azure ML vCPU total for a priority (Dedicated, LowPriority), over every family."""
        return self._total_limits[priority.lower()]

    def families(self, region: str) -> list[str]:
        return sorted({o.sku.family for o in self.offers(region)})


def load_world(path: Path | None = None) -> World:
    path = Path(path or os.environ.get(WORLD_ENV) or DEFAULT_WORLD)
    with open(path, encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=_Loader) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the emulator world must be a YAML mapping")
    # Name rules default to the packaged ones, so an override file may set only regions and quota.
    if "names" not in data and path != DEFAULT_WORLD:
        with open(DEFAULT_WORLD, encoding="utf-8") as fh:
            data["names"] = yaml.load(fh, Loader=_Loader)["names"]
    return World(data, load_catalog(), path)
