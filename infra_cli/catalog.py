"""The SKU catalog (validators/skus.yaml) as typed, read-only records.

Lookups are case-insensitive because Azure is (`standard_nd96asr_v4` names the same size).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from infra_cli.paths import validators_dir
from infra_cli.size_name import parse_size_name


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
    healthy_busbw_gbs: HealthyBusbw = field(default_factory=HealthyBusbw)
    nccl_env: dict[str, str] = field(default_factory=dict)
    # The day Azure retires (or retired) the size; `retired: true` without a day reads as long retired.
    retirement_date: datetime.date | None = None
    retirement_source: str | None = None
    unconfirmed: tuple[str, ...] = ()
    note: str | None = None

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


class Catalog:
    def __init__(self, skus: dict[str, Sku]):
        self._by_lower = {name.lower(): sku for name, sku in skus.items()}
        self._families: dict[str, list[str]] | None = None  # built on first use: only did-you-mean needs it

    def __iter__(self):
        return iter(sorted(self._by_lower.values(), key=lambda s: s.name))

    def get(self, size: str) -> Sku | None:
        return self._by_lower.get(size.lower())

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


def _retirement_date(name: str, value: object) -> datetime.date | None:
    if value is False or value is None:
        return None
    if value is True:
        return datetime.date.min  # retired, day unknown
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError(f"skus.yaml: {name}: retired must be true, false or a day (YYYY-MM-DD), not {value!r}")


def _sku_from_row(name: str, row: dict, env_profiles: dict[str, dict]) -> Sku:
    ib = row.get("infiniband")
    profile = row.get("nccl_env")
    if profile is not None and profile not in env_profiles:
        raise ValueError(f"skus.yaml: {name}: unknown nccl_env profile {profile!r}")
    return Sku(
        name=name,
        gpus=int(row["gpus"]),
        vcpus=int(row["vcpus"]),
        memory_gib=int(row["memory_gib"]),
        family=row["family"],
        rdma=bool(row["rdma"]),
        sriov=bool(row["sriov"]),
        nccl_over_ib=bool(row["nccl_over_ib"]),
        source=row["source"],
        gpu_model=row.get("gpu_model"),
        accelerator=row.get("accelerator", "nvidia"),
        infiniband=InfiniBand(**ib) if ib else None,
        healthy_busbw_gbs=HealthyBusbw(**(row.get("healthy_busbw_gbs") or {})),
        nccl_env={k: str(v) for k, v in (env_profiles.get(profile) or {}).items()},
        retirement_date=_retirement_date(name, row.get("retired", False)),
        retirement_source=row.get("retirement_source"),
        unconfirmed=tuple(row.get("unconfirmed") or ()),
        note=row.get("note"),
    )


def load_catalog(path: Path | None = None) -> Catalog:
    path = path or validators_dir() / "skus.yaml"
    return _load_catalog_cached(str(path))


@lru_cache(maxsize=4)
def _load_catalog_cached(path: str) -> Catalog:
    data = _catalog_data(Path(path))
    if not isinstance(data, dict) or not isinstance(data.get("sizes"), dict):
        raise ValueError("skus.yaml: expected a mapping with `sizes:` (size name -> facts)")
    profiles = data.get("nccl_env_profiles") or {}
    bad = [str(name) for name, row in data["sizes"].items() if not isinstance(row, dict)]
    if bad or not isinstance(profiles, dict):
        raise ValueError(f"skus.yaml: each size (and nccl_env_profiles) must be a mapping: {', '.join(bad[:5])}")
    return Catalog({str(name): _sku_from_row(str(name), row, profiles) for name, row in data["sizes"].items()})


def _cache_file(path: Path, stat: os.stat_result) -> Path | None:
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "infra"
    except (RuntimeError, KeyError):  # no home directory to be found: no cache
        return None
    if not base.is_absolute():  # a relative XDG_CACHE_HOME is invalid by the spec; never write under the cwd
        return None
    where = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    version = hashlib.sha256(f"{stat.st_mtime_ns}|{stat.st_size}".encode()).hexdigest()[:16]
    return base / f"skus-{where}-{version}.json"


def _catalog_data(path: Path) -> dict:
    """skus.yaml as plain data. Parsing ~100 rows of YAML costs tens of milliseconds on every `infra validate`,
    so the parsed rows are kept as JSON in the user's cache, keyed by the file's path, size and mtime."""
    stat = path.stat()
    cache = _cache_file(path, stat)
    try:
        if cache is not None:
            with open(cache, encoding="utf-8") as fh:
                data = json.load(fh)
            if isinstance(data, dict) and isinstance(data.get("sizes"), dict):
                return data
    except (OSError, ValueError):
        pass
    with open(path, encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if cache is None or not isinstance(data, dict):
        return data
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, default=_json_day), encoding="utf-8")
        os.replace(tmp, cache)
        _prune(cache)
    except (OSError, TypeError, ValueError):
        pass  # no cache (read-only home, odd values): parse every time
    return data


_CACHE_KEEP = 8  # catalogs kept: the packaged one and a few users' copies (tests make many in temp dirs)


def _prune(cache: Path) -> None:
    """Drop earlier versions of this catalog's cache, and the least recently written beyond _CACHE_KEEP."""
    same_file = cache.name.rsplit("-", 1)[0] + "-"
    others = []
    for entry in cache.parent.glob("skus-*.json"):
        if entry == cache:
            continue
        if entry.name.startswith(same_file):
            entry.unlink(missing_ok=True)
        else:
            others.append(entry)
    if len(others) >= _CACHE_KEEP:
        others.sort(key=lambda e: e.stat().st_mtime_ns)
        for entry in others[:len(others) - _CACHE_KEEP + 1]:
            entry.unlink(missing_ok=True)


def _json_day(value: object) -> str:
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise TypeError(f"not JSON: {value!r}")
