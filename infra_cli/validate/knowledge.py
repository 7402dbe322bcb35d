"""The non-SKU knowledge in validators/: frameworks' launch needs and what curated environments carry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import yaml

from infra_cli.catalog import Catalog, load_catalog
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.paths import validators_dir
from infra_cli.validate import launch

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
    script_launch: str = "per-process"        # what `python script.py` is: Lightning launches per node itself
    packages_with_type: dict[str, tuple[str, ...]] | None = None   # type -> requirement profiles it needs
    nodes_flags: tuple[str, ...] = ()         # Lightning's trainer flags
    devices_flags: tuple[str, ...] = ()
    trainer_keywords: dict[str, str] | None = None   # nodes/devices -> Trainer(...) keyword


@dataclass(frozen=True)
class CuratedInfo:
    pattern: str
    provides: dict[str, str | None]
    gpu: bool
    source: str
    registry: str | None = None   # the row names environments of this registry only (azureml://registries/R/...)


@lru_cache(maxsize=1)
def frameworks() -> dict[str, FrameworkInfo]:
    data = _read("frameworks.yaml")["frameworks"]
    return {
        name: FrameworkInfo(name, tuple(row["types"]), tuple(row["launchers"]),
                            tuple(row.get("needs_mpi_with_type") or ()),
                            row.get("per_process_command_must_contain"), row["source"],
                            row.get("script_launch", "per-process"),
                            {t: tuple(p) for t, p in (row.get("packages_with_type") or {}).items()},
                            tuple(row.get("nodes_flags") or ()), tuple(row.get("devices_flags") or ()),
                            dict(row.get("trainer_keywords") or {}))
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
    return tuple(CuratedInfo(r["pattern"], dict(r.get("provides") or {}), bool(r.get("gpu")), r["source"],
                             r.get("registry"))
                 for r in _read("curated_environments.yaml")["curated"])


@lru_cache(maxsize=1)
def _image_rows() -> tuple[CuratedInfo, ...]:
    return tuple(CuratedInfo(r["pattern"], dict(r.get("provides") or {}), bool(r.get("gpu")), r["source"])
                 for r in _read("curated_environments.yaml").get("images") or ())


def image_info(image: str) -> CuratedInfo | None:
    """What a known image family carries (AzureML base images, curated images): curated_environments.yaml
    `images:`, matched against the reference without its registry's letter case mattering. First match wins."""
    for row in _image_rows():
        if re.search(row.pattern, image.strip(), re.IGNORECASE):
            return row
    return None


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


@dataclass(frozen=True)
class RegistryEnvironment:
    """One environment a registry serves: versions 1..latest, each with its image."""

    name: str
    latest: int
    image: str  # with {version}
    source: str


@lru_cache(maxsize=1)
def curated_registries() -> dict[str, tuple[RegistryEnvironment, ...]]:
    """registry name (lower-case) -> the environments it serves (curated_environments.yaml `registry:`)."""
    data = _read("curated_environments.yaml").get("registry") or {}
    return {registry.lower(): tuple(RegistryEnvironment(r["name"], int(r["latest"]), r["image"], r["source"])
                                    for r in rows or ())
            for registry, rows in data.items()}


# Workspace-form names with this prefix are curated: Azure ML resolves them from the `azureml` registry
# (azure-ai-ml's CURATED_ENV_PREFIX passes them to the service unexpanded).
CURATED_PREFIX = "AzureML-"
CURATED_REGISTRY = "azureml"


@dataclass(frozen=True)
class EnvironmentReference:
    """A parsed environment reference: where it lives (a registry, or None for the workspace), which
    environment, and a version or a label (exactly one)."""

    registry: str | None
    name: str
    version: str | None
    label: str | None


def parse_environment_reference(reference: str) -> EnvironmentReference:
    """Every form azure-ai-ml accepts for a job's environment: azureml:NAME@LABEL, azureml:NAME:VERSION,
    NAME@LABEL, NAME:VERSION, azureml://registries/R/environments/NAME/versions/V and .../labels/L."""
    ref = reference.strip()
    if ref.lower().startswith("azureml://registries/"):
        parts = ref.split("/")  # azureml: '' registries R environments NAME versions|labels X
        registry, name, kind, value = parts[3], parts[5], parts[6], parts[7]
        return EnvironmentReference(registry, name, value if kind == "versions" else None,
                                    value if kind == "labels" else None)
    ref = ref[len("azureml:"):] if ref.startswith("azureml:") else ref
    if "@" in ref:
        name, label = ref.split("@", 1)
        version = None
    else:
        name, _, version = ref.partition(":")
        label = None if version else "latest"
    registry = CURATED_REGISTRY if name.startswith(CURATED_PREFIX) else None
    return EnvironmentReference(registry, name, version or None, label)


def _registry_of(reference: str) -> str | None:
    ref = reference.strip()
    return ref.split("/")[3].lower() if ref.lower().startswith("azureml://registries/") and ref.count("/") > 3 else None


def curated_info(reference: str) -> CuratedInfo | None:
    name = curated_name(reference)
    registry = _registry_of(reference)
    for row in _curated_rows():
        if row.registry is not None and row.registry != registry:
            continue  # registry names (acpt-pytorch-2.2-...) mean nothing in a workspace
        if re.search(row.pattern, name, re.IGNORECASE):
            return row
    return None


def derived_launcher(command: str | None, framework: str | None) -> str | None:
    """The launcher a distribution's command implies (see launch.derived_launcher); with no command, the
    framework's own (Lightning: per-node); None when nothing says."""
    fw = frameworks().get(framework) if framework else None
    script_launch = fw.script_launch if fw else "per-process"
    if not command:
        return script_launch if fw and script_launch != "per-process" else None
    return launch.derived_launcher(command, launchers(), script_launch)


@lru_cache(maxsize=1)
def launchers() -> launch.LauncherTable:
    """validators/launchers.yaml: which commands launch processes per node or from a head node, and their flags."""
    data = _read("launchers.yaml")
    specs = []
    for name, row in data["launchers"].items():
        commands = tuple(tuple(c) if isinstance(c, list) else (c,) for c in row["commands"])
        specs.append(launch.LauncherSpec(
            name, row["kind"], commands, tuple(row.get("python_modules") or ()),
            frozenset(row.get("boolean_flags") or ()), {r: tuple(row[r]) for r in launch.ROLES if row.get(r)},
            row.get("processes_default"), row.get("nodes_default"), tuple(row.get("head_node_flags") or ()),
            tuple(row.get("per_node_flags") or ()), tuple(row.get("multi_node_requires") or ()), row["source"]))
    return launch.LauncherTable(tuple(specs), tuple(data["python_interpreters"]), frozenset(data["wrappers"]),
                         frozenset(data["shells"]))


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


@dataclass(frozen=True)
class TagLimits:
    max_tags: int
    max_name_length: int
    max_value_length: int
    name_forbidden_characters: str
    reserved_prefix: str
    infra_tags: int
    source: str


@lru_cache(maxsize=1)
def name_rules() -> tuple[NameRule, ...]:
    rows = _read("names.yaml")["names"]
    return tuple(NameRule(r["what"], r["section"], r.get("field"), r["rule_id"], re.compile(r["pattern"]), r["rule"],
                          r["source"]) for r in rows.values())


@lru_cache(maxsize=1)
def tag_limits() -> TagLimits:
    t = _read("names.yaml")["tags"]
    return TagLimits(int(t["max_tags"]), int(t["max_name_length"]), int(t["max_value_length"]),
                     str(t["name_forbidden_characters"]), str(t["reserved_prefix"]), int(t["infra_tags"]), t["source"])
