"""validators/curated_environments.yaml: what Azure ML's curated environments and base images carry, the
environments a registry serves (the emulator's `azureml` registry reads them too), and how environment
references are spelled."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from infra_cli.knowledge.reader import at, load, mapping, sequence

FILE = "curated_environments.yaml"
HINT = ("fix validators/curated_environments.yaml: each curated and images row needs pattern (a regular "
        "expression), provides, gpu and source; each registry environment needs name, latest, image and source")

# Workspace-form names with this prefix are curated: Azure ML resolves them from the `azureml` registry
# (azure-ai-ml's CURATED_ENV_PREFIX passes them to the service unexpanded).
CURATED_PREFIX = "AzureML-"
CURATED_REGISTRY = "azureml"


@dataclass(frozen=True)
class CuratedInfo:
    pattern: str
    provides: dict[str, str | None]
    gpu: bool | None   # images rows: None where the row does not say (a family of CPU and GPU images)
    source: str
    registry: str | None = None   # the row names environments of this registry only (azureml://registries/R/...)


@dataclass(frozen=True)
class RegistryEnvironment:
    """One environment a registry serves: versions 1..latest, each with its image."""

    name: str
    latest: int
    image: str  # with {version}
    source: str
    aliases: tuple[str, ...] = ()         # other names Azure ML resolves to it (AzureML-NAME)
    info: CuratedInfo | None = None       # what it carries, where the data says (`provides:`)
    source_path: str | None = None        # its folder in Azure/azureml-assets

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class Curated:
    curated: tuple[CuratedInfo, ...]
    images: tuple[CuratedInfo, ...]
    registries: dict[str, tuple[RegistryEnvironment, ...]]


def _rows(data: dict, section: str, with_registry: bool) -> tuple[CuratedInfo, ...]:
    out = []
    for i, r in enumerate(sequence(data.get(section), section)):
        with at(section, i):
            r = mapping(r, "a row")
            re.compile(r["pattern"])
            gpu = bool(r.get("gpu")) if with_registry or "gpu" in r else None
            out.append(CuratedInfo(r["pattern"], dict(mapping(r.get("provides") or {}, "provides")), gpu,
                                   r["source"], r.get("registry") if with_registry else None))
    return tuple(out)


def _curated(data: Any) -> Curated:
    data = mapping(data, FILE)
    if "curated" not in data:
        raise KeyError("curated")
    registries = {}
    for registry, rows in mapping(data.get("registry") or {}, "registry").items():
        envs = []
        for i, r in enumerate(sequence(rows, "a registry's environments")):
            with at("registry", registry, i):
                r = mapping(r, "a registry environment")
                provides = r.get("provides")
                info = None if provides is None else CuratedInfo(
                    "", dict(mapping(provides, "provides")), bool(r.get("gpu", True)), r["source"], str(registry).lower())
                aliases = tuple(str(a) for a in sequence(r.get("aliases"), "aliases"))
                envs.append(RegistryEnvironment(r["name"], int(r["latest"]), r["image"], r["source"], aliases, info,
                                                r.get("source_path")))
        registries[str(registry).lower()] = tuple(envs)
    return Curated(_rows(data, "curated", True), _rows(data, "images", False), registries)


def _read() -> Curated:
    return load(FILE, _curated, hint=HINT)


def image_info(image: str) -> CuratedInfo | None:
    """What a known image family carries (AzureML base images, curated images): curated_environments.yaml
    `images:`, matched against the reference without its registry's letter case mattering. First match wins."""
    for row in _read().images:
        if re.search(row.pattern, image.strip(), re.IGNORECASE):
            return row
    return None


def curated_registries() -> dict[str, tuple[RegistryEnvironment, ...]]:
    """registry name (lower-case) -> the environments it serves (curated_environments.yaml `registry:`)."""
    return _read().registries


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
        name, kind, value = parts[5], parts[6], parts[7]
        return EnvironmentReference(parts[3], name, value if kind == "versions" else None,
                                    value if kind == "labels" else None)
    ref = ref[len("azureml:"):] if ref.startswith("azureml:") else ref
    version: str | None
    label: str | None
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


def registry_environment(registry: str, name: str) -> RegistryEnvironment | None:
    """The environment a registry serves under this name or one of its aliases (any case)."""
    wanted = name.lower()
    return next((env for env in _read().registries.get(registry.lower(), ())
                 if wanted in (n.lower() for n in env.names())), None)


def registry_name_forms(name: str) -> tuple[str, ...]:
    """The names a curated reference may mean in a registry, in order: as written, then without the legacy
    `AzureML-` prefix (public samples write azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest for the `azureml`
    registry's acpt-pytorch-2.2-cuda12.1; Azure ML resolves both)."""
    prefix = CURATED_PREFIX.lower()
    if name.lower().startswith(prefix) and len(name) > len(prefix):
        return (name, name[len(prefix):])
    return (name,)


def resolve_registry_environment(registry: str, name: str) -> RegistryEnvironment | None:
    """The environment a curated name means in a registry, in any of its forms (registry_name_forms)."""
    return next((env for form in registry_name_forms(name) if (env := registry_environment(registry, form))), None)


# How curated environment names say their framework and device (AzureML-sklearn-0.24-ubuntu18.04-py37-cpu,
# acpt-pytorch-2.8-cuda12.6, tensorflow-2.16-cuda12): a word of the name, first match wins
_NAME_FRAMEWORKS = ("pytorch", "tensorflow", "sklearn", "lightgbm", "xgboost", "deepspeed", "horovod", "minimal")
_NAME_DEVICES = (("gpu", ("gpu", "cuda")), ("cpu", ("cpu",)))


def name_kind(name: str) -> tuple[str | None, str | None]:
    """(framework, device) a curated environment's name says, each None where it says nothing."""
    words = re.split(r"[-_]", name.lower())
    framework = next((f for f in _NAME_FRAMEWORKS if f in words), None)
    device = next((d for d, marks in _NAME_DEVICES if any(w.startswith(marks) for w in words)), None)
    return framework, device


def _same_kind(a: tuple[str | None, str | None], b: tuple[str | None, str | None]) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(a, b))


def close_names(name: str, names: list[str], n: int = 3) -> list[str]:
    """The names of a registry's (or workspace's) list closest to `name`, compared in any case and without the
    legacy `AzureML-` prefix: the did-you-mean of a reference that names nothing. Only names of the same framework
    and device as `name` says (name_kind): a scikit-learn CPU environment is never offered a TensorFlow GPU one."""
    def bare(text: str) -> str:
        return registry_name_forms(text)[-1].lower()

    kind = name_kind(bare(name))
    by_bare: dict[str, str] = {}
    for listed in names:
        if _same_kind(kind, name_kind(bare(listed))):
            by_bare.setdefault(bare(listed), listed)
    return [by_bare[m] for m in difflib.get_close_matches(bare(name), list(by_bare), n=n, cutoff=0.6)]


def curated_info(reference: str) -> CuratedInfo | None:
    """What a curated environment carries: its own row of `registry:` where it has `provides:`, else the first
    `curated:` pattern that matches its name."""
    name = curated_name(reference)
    registry = _registry_of(reference)
    known = resolve_registry_environment(registry or CURATED_REGISTRY, name)
    if known is not None and known.info is not None:
        return known.info
    for row in _read().curated:
        if row.registry is not None and row.registry != registry:
            continue  # registry names (acpt-pytorch-2.2-...) mean nothing in a workspace
        if re.search(row.pattern, name, re.IGNORECASE):
            return row
    return None
