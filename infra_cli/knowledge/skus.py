"""validators/skus.yaml as typed, read-only records: the sizes and their list prices.

Lookups are case-insensitive because Azure is (`standard_nd96asr_v4` names the same size).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from infra_cli.knowledge.reader import at, day, fault, load, mapping, sequence
from infra_cli.knowledge.size_name import parse_size_name, written_alike

FILE = "skus.yaml"
HINT = ("fix validators/skus.yaml: each size needs gpus, vcpus, memory_gib, family, rdma, sriov, nccl_over_ib "
        "and source; each price needs as_of, source and a number per tier (see the comments in the file)")
TIERS = ("dedicated", "low_priority")


@dataclass(frozen=True)
class InfiniBand:
    generation: str
    links: int
    gbps_per_link: int

    @property
    def total_gbps(self) -> int:
        return self.links * self.gbps_per_link


@dataclass(frozen=True)
class HealthyBusbw:
    """all_reduce bus bandwidth (GB/s) of a healthy VM of this size."""

    single_node: float | None = None
    multi_node: float | None = None
    warn_below: float | None = None
    fail_below: float | None = None
    message_bytes: int | None = None


@dataclass(frozen=True)
class Sku:
    name: str
    gpus: int
    vcpus: int
    memory_gib: int
    family: str
    rdma: bool
    sriov: bool
    nccl_over_ib: bool
    source: str
    gpu_model: str | None = None
    accelerator: str = "nvidia"
    infiniband: InfiniBand | None = None
    ethernet_gbps: int | None = None   # the VM's Ethernet bandwidth: what TCP sockets get between nodes
    healthy_busbw_gbs: HealthyBusbw = field(default_factory=HealthyBusbw)
    nccl_env: dict[str, str] = field(default_factory=dict)
    # The day Azure retires (or retired) the size; `retired: true` without a day reads as long retired.
    retirement_date: datetime.date | None = None
    retirement_source: str | None = None
    unconfirmed: tuple[str, ...] = ()
    note: str | None = None
    # False: Azure ML refuses `tier: low_priority` on the size (UnsupportedVMSizeForLowPriority), per the source
    low_priority: bool = True
    low_priority_source: str | None = None

    def retired_as_of(self, today: datetime.date) -> bool:
        return self.retirement_date is not None and self.retirement_date <= today

    def retiring_as_of(self, today: datetime.date) -> bool:
        """Azure announced the retirement, and the day has not come yet."""
        return self.retirement_date is not None and self.retirement_date > today

    @property
    def retired(self) -> bool:
        return self.retired_as_of(datetime.date.today())

    @property
    def infiniband_eligible(self) -> bool:
        """InfiniBand usable by MPI/NCCL inside Azure ML: RDMA exposed through SR-IOV."""
        return self.rdma and self.sriov and self.infiniband is not None

    @property
    def sockets_between_nodes(self) -> str:
        """What NCCL and MPI get between two VMs of this size without usable InfiniBand: TCP sockets on its
        Ethernet, with the bandwidth where the catalog has it."""
        return ("TCP sockets on Ethernet (" + (f"{self.ethernet_gbps} Gb/s per VM" if self.ethernet_gbps
                else "its bandwidth not in the catalog") + ")")

    def to_json(self) -> dict:
        ib = self.infiniband
        hb = self.healthy_busbw_gbs
        return {
            "name": self.name,
            "gpus": self.gpus,
            "gpu_model": self.gpu_model,
            "accelerator": self.accelerator,
            "vcpus": self.vcpus,
            "memory_gib": self.memory_gib,
            "family": self.family,
            "rdma": self.rdma,
            "sriov": self.sriov,
            "infiniband_eligible": self.infiniband_eligible,
            "nccl_over_ib": self.nccl_over_ib,
            "infiniband": None
            if ib is None
            else {"generation": ib.generation, "links": ib.links, "gbps_per_link": ib.gbps_per_link,
                  "total_gbps": ib.total_gbps},
            "ethernet_gbps": self.ethernet_gbps,
            "healthy_busbw_gbs": {k: v for k, v in vars(hb).items() if v is not None},
            "nccl_env": dict(self.nccl_env),
            "retired": self.retired,
            "retirement_date": None if self.retirement_date in (None, datetime.date.min)
            else self.retirement_date.isoformat(),
            "retirement_source": self.retirement_source,
            "unconfirmed": list(self.unconfirmed),
            "note": self.note,
            "source": self.source,
        }


@dataclass(frozen=True)
class Price:
    """The list price of one node-hour of a size in one region (pay-as-you-go, Linux), per tier: a figure
    as published on `as_of`, to be refreshed, never fetched by infra. None: not known for that tier."""

    region: str
    dedicated: float | None
    low_priority: float | None
    as_of: datetime.date
    source: str
    unconfirmed: tuple[str, ...] = ()

    def per_node_hour(self, tier: str) -> float | None:
        return self.low_priority if tier == "low_priority" else self.dedicated


class Catalog:
    """The GPU/HPC sizes (what iteration, `names()` and `infra skus` list) and the general-purpose CPU sizes
    (`general_purpose()`), both found by `get()`; the region names Azure has (`regions`)."""

    def __init__(self, skus: dict[str, Sku], prices: dict[str, dict[str, Price]] | None = None,
                 currency: str = "USD", general_purpose: dict[str, Sku] | None = None,
                 regions: frozenset[str] = frozenset()):
        self._by_lower = {name.lower(): sku for name, sku in skus.items()}
        self._general = {name.lower(): sku for name, sku in (general_purpose or {}).items()}
        self.regions = regions
        self._families: dict[str, list[str]] | None = None  # built on first use: only did-you-mean needs it
        self._prices = {name.lower(): regions for name, regions in (prices or {}).items()}
        self.currency = currency

    def price(self, size: str, region: str | None) -> Price | None:
        """The list price of `size` in `region` (Azure's short name, any case), or None: unknown, never a guess
        from another region."""
        if not region:
            return None
        return self._prices.get(size.lower(), {}).get(region.replace(" ", "").lower())

    def ranking_price(self, size: str, region: str | None, tier: str = "dedicated") -> float | None:
        """A size's list price per node-hour for ordering suggestions by cost: the region's where published, else
        the lowest published in any region (a rank, never shown as the region's price); None: no price known."""
        found = self.price(size, region)
        if found is not None and found.per_node_hour(tier) is not None:
            return found.per_node_hour(tier)
        known = [p.per_node_hour(tier) for p in self._prices.get(size.lower(), {}).values()]
        return min((k for k in known if k is not None), default=None)

    def gpu_infiniband_gbps(self) -> tuple[int, int] | None:
        """(lowest, highest) InfiniBand bandwidth per VM, Gb/s, of the current GPU sizes whose InfiniBand NCCL uses:
        what a GPU job across nodes gets on an InfiniBand size, against TCP sockets on another."""
        found = [s.infiniband.total_gbps for s in self
                 if s.infiniband_eligible and s.nccl_over_ib and s.gpus and s.retirement_date is None]
        return (min(found), max(found)) if found else None

    def __iter__(self):
        return iter(sorted(self._by_lower.values(), key=lambda s: s.name))

    def get(self, size: str) -> Sku | None:
        key = size.lower()
        return self._by_lower.get(key) or self._general.get(key)

    def written_alike(self, size: str) -> str | None:
        """The catalogued size (GPU/HPC or general-purpose) that `size` misspells (size_name.written_alike)."""
        if self.get(size) is not None:
            return None
        return written_alike(size, [s.name for s in (*self, *self.general_purpose())])

    def general_purpose(self) -> list[Sku]:
        """The CPU sizes of `general_purpose:` (D, DS, E, F families), by name."""
        return sorted(self._general.values(), key=lambda s: s.name)

    def knows_region(self, region: str) -> bool:
        """Azure has a region of this name (`regions:`); any region when the file lists none."""
        return not self.regions or region.replace(" ", "").lower() in self.regions

    def names(self) -> list[str]:
        return [s.name for s in self]

    def family_names(self, family: str) -> list[str]:
        """Catalogued sizes of one family (`ND`, `NC`, `HB`, ...), as named by Azure's convention."""
        if self._families is None:
            self._families = {}
            for sku in self:
                parsed = parse_size_name(sku.name)
                self._families.setdefault(parsed.family if parsed else "", []).append(sku.name)
        return list(self._families.get(family.upper(), ()))


def _retirement_date(value: object) -> datetime.date | None:
    if value is False or value is None:
        return None
    if value is True:
        return datetime.date.min  # retired, day unknown
    try:
        return day(value, "retired")
    except ValueError:
        raise ValueError(f"retired must be true, false or a day (YYYY-MM-DD), not {value!r}") from None


def _sku_from_row(name: str, row: dict, env_profiles: dict[str, dict]) -> Sku:
    mapping(row, "a size")
    ib = row.get("infiniband")
    profile = row.get("nccl_env")
    if profile is not None and profile not in env_profiles:
        raise fault(f"unknown nccl_env profile {profile!r} (known: {', '.join(env_profiles)})", "nccl_env")
    with at("retired"):
        retired = _retirement_date(row.get("retired", False))
    return Sku(
        name=name,
        gpus=int(row["gpus"]),
        vcpus=int(row["vcpus"]),
        memory_gib=int(row["memory_gib"]),
        family=str(row["family"]),
        rdma=bool(row["rdma"]),
        sriov=bool(row["sriov"]),
        nccl_over_ib=bool(row["nccl_over_ib"]),
        source=str(row["source"]),
        gpu_model=row.get("gpu_model"),
        accelerator=row.get("accelerator", "nvidia"),
        infiniband=InfiniBand(**ib) if ib else None,
        ethernet_gbps=int(row["ethernet_gbps"]) if row.get("ethernet_gbps") is not None else None,
        healthy_busbw_gbs=HealthyBusbw(**(row.get("healthy_busbw_gbs") or {})),
        nccl_env={k: str(v) for k, v in ((env_profiles.get(profile) if profile is not None else None) or {}).items()},
        retirement_date=retired,
        retirement_source=row.get("retirement_source"),
        unconfirmed=tuple(row.get("unconfirmed") or ()),
        note=row.get("note"),
        low_priority=_low_priority(row),
        low_priority_source=row.get("low_priority_source"),
    )


def _low_priority(row: dict) -> bool:
    value = row.get("low_priority", True)
    if not isinstance(value, bool):
        raise fault(f"low_priority must be true or false, not {value!r}", "low_priority")
    if value is False and not row.get("low_priority_source"):
        raise fault("low_priority: false needs low_priority_source (where Azure's refusal is recorded)",
                    "low_priority_source")
    return value


GENERAL_PURPOSE_KEYS = {"vcpus", "memory_gib", "family", "source", "unconfirmed", "note"}


def _general_from_row(name: str, row: Any) -> Sku:
    """A CPU size: no GPUs, no RDMA, so no InfiniBand; its vCPUs and quota family as Azure names them."""
    mapping(row, "a size")
    unknown = sorted(set(row) - GENERAL_PURPOSE_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(str, unknown))}: a general-purpose size has "
                         f"{', '.join(sorted(GENERAL_PURPOSE_KEYS))}")
    if not str(row.get("source", "")).startswith("https://"):
        raise fault("a size needs its public source (https://...)", "source")
    return Sku(name=name, gpus=0, vcpus=int(row["vcpus"]), memory_gib=int(row["memory_gib"]),
               family=str(row["family"]), rdma=False, sriov=False, nccl_over_ib=False, source=str(row["source"]),
               gpu_model=None, accelerator="none", unconfirmed=tuple(row.get("unconfirmed") or ()),
               note=row.get("note") or "a general-purpose CPU size")


def _amount(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"a price must be a number of currency units per node-hour (>= 0) or null, not {value!r}")
    return float(value)


def _prices_of(size: str, row: dict) -> dict[str, Price]:
    """`prices.sizes.SIZE`: as_of and source for the size, each region's tiers (a region may set its own)."""
    mapping(row, "a size's prices")
    out = {}
    for region, tiers in mapping(row.get("regions"), "regions").items():
        with at("regions", region):
            tiers = mapping(tiers, "a region's prices")
            unknown = sorted(set(tiers) - {*TIERS, "as_of", "source", "unconfirmed"})
            if unknown:
                raise ValueError(f"unknown key(s) {', '.join(map(str, unknown))}: a region has {', '.join(TIERS)}, "
                                 "and may set its own as_of, source, unconfirmed")
            with at("as_of"):
                as_of = day(tiers.get("as_of", row.get("as_of")), "as_of")
            source = tiers.get("source", row.get("source"))
            if not source:
                raise fault("a price needs its public source (the retail prices API query or pricing page)",
                            "source")
            with at("dedicated"):
                dedicated = _amount(tiers.get("dedicated"))
            with at("low_priority"):
                low = _amount(tiers.get("low_priority"))
            unconfirmed = tuple(sequence(tiers.get("unconfirmed", row.get("unconfirmed")), "unconfirmed"))
            out[str(region).lower()] = Price(str(region).lower(), dedicated, low, as_of, str(source), unconfirmed)
    return out


def _catalog(data: Any) -> Catalog:
    data = mapping(data, "skus.yaml")
    with at("sizes"):
        sizes = mapping(data.get("sizes"), "`sizes:` (size name -> facts)")
    with at("nccl_env_profiles"):
        profiles = mapping(data.get("nccl_env_profiles") or {}, "nccl_env_profiles")
    skus = {}
    for name, row in sizes.items():
        with at("sizes", name):
            skus[str(name)] = _sku_from_row(str(name), row, profiles)
    general = {}
    for name, row in mapping(data.get("general_purpose") or {}, "`general_purpose:` (size name -> facts)").items():
        with at("general_purpose", name):
            if str(name).lower() in {s.lower() for s in skus}:
                raise ValueError(f"{name} is already a size of `sizes:`")
            general[str(name)] = _general_from_row(str(name), row)
    with at("regions"):
        regions = mapping(data.get("regions") or {}, "`regions:` (source, names)")
        names = frozenset(str(r).lower() for r in sequence(regions.get("names") or [], "regions.names"))
    prices: dict[str, dict[str, Price]] = {}
    with at("prices"):
        section = mapping(data.get("prices") or {}, "prices")
        currency = str(section.get("currency", "USD"))
        for name, row in mapping(section.get("sizes") or {}, "prices.sizes").items():
            with at("sizes", name):
                if str(name).lower() not in {s.lower() for s in skus}:
                    raise ValueError(f"{name} is not a size of `sizes:`")
                prices[str(name)] = _prices_of(str(name), row)
    return Catalog(skus, prices, currency, general, names)


def load_catalog() -> Catalog:
    """The catalog of validators/skus.yaml (INFRA_VALIDATORS_DIR's, if set); a broken file is a
    `knowledge.invalid` DiagnosticError."""
    return load(FILE, _catalog, hint=HINT, json_cache=True)
