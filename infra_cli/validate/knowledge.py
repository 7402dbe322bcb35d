"""The non-SKU knowledge in validators/: frameworks' launch needs and what curated environments carry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import yaml

from infra_cli.catalog import Catalog, load_catalog
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.paths import validators_dir

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read(name: str) -> dict:
    with open(validators_dir() / name, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_Loader)


def checked_catalog() -> Catalog:
    """The SKU catalog; a broken validators/ (users extend it by hand) is a diagnostic, not a traceback."""
    try:
        return load_catalog()
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise DiagnosticError([Diagnostic(
            "error", "knowledge.invalid", f"cannot read the SKU catalog: {exc!r}",
            str(validators_dir() / "skus.yaml"), None, None,
            "fix validators/skus.yaml (each size needs gpus, vcpus, memory_gib, family, rdma, sriov, "
            "nccl_over_ib, source) or unset INFRA_VALIDATORS_DIR")]) from None


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    types: tuple[str, ...]
    launchers: tuple[str, ...]
    needs_mpi_with_type: tuple[str, ...]
    per_process_command_must_contain: str | None
    source: str


@dataclass(frozen=True)
class CuratedInfo:
    pattern: str
    provides: dict[str, str | None]
    gpu: bool
    source: str


@lru_cache(maxsize=1)
def frameworks() -> dict[str, FrameworkInfo]:
    data = _read("frameworks.yaml")["frameworks"]
    return {
        name: FrameworkInfo(name, tuple(row["types"]), tuple(row["launchers"]),
                            tuple(row.get("needs_mpi_with_type") or ()),
                            row.get("per_process_command_must_contain"), row["source"])
        for name, row in data.items()
    }


@lru_cache(maxsize=1)
def types_needing_mpi() -> frozenset[str]:
    data = _read("frameworks.yaml")["distribution_types"]
    return frozenset(t for t, row in data.items() if row.get("needs_mpi"))


@lru_cache(maxsize=1)
def launcher_variables() -> dict[str, dict[str, str]]:
    """distribution type -> {variable Azure ML's launcher sets: the severity of setting it yourself}."""
    data = _read("frameworks.yaml")["distribution_types"]
    return {t: {var: severity for severity, names in (row.get("launcher_sets") or {}).items() for var in names}
            for t, row in data.items()}


@lru_cache(maxsize=1)
def _curated_rows() -> tuple[CuratedInfo, ...]:
    return tuple(CuratedInfo(r["pattern"], dict(r.get("provides") or {}), bool(r.get("gpu")), r["source"])
                 for r in _read("curated_environments.yaml")["curated"])


def curated_name(reference: str) -> str:
    """'azureml:AzureML-ACPT-pytorch-2.2@latest' or 'azureml://registries/azureml/environments/X/...' -> X."""
    ref = reference.strip()
    if ref.startswith("azureml://"):
        parts = ref.split("/")
        if "environments" in parts:
            i = parts.index("environments")
            if i + 1 < len(parts):
                return parts[i + 1]
        return parts[-1]
    if ref.startswith("azureml:"):
        ref = ref[len("azureml:"):]
    return re.split(r"[@:]", ref, maxsplit=1)[0]


def curated_info(reference: str) -> CuratedInfo | None:
    name = curated_name(reference)
    for row in _curated_rows():
        if re.search(row.pattern, name, re.IGNORECASE):
            return row
    return None
