"""What an environment carries (curated environment, base image, build template, build context, conda and pip
files, its own `requires:`), read from the project's files: a regular file inside the project, never through a
symlink out of it, and only its first _READ_LIMIT bytes."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.curated import curated_info, image_info
from infra_cli.knowledge.docker_templates import template_meta
from infra_cli.knowledge.requirements import SpecError, parse_requirement
from infra_cli.paths import inside
from infra_cli.stack.model import Environment
from infra_cli.stack.source import load_yaml
from infra_cli.validate.dockerfile import pip_name, read_dockerfile


def build_template_provides(name: str) -> dict[str, str | None] | None:
    """What an image built from templates/docker/NAME provides (its template.yaml), or None if unknown."""
    data = template_meta(name)
    if data is None:
        return None
    provides: dict[str, str | None] = {}
    for spec in data.get("provides") or []:
        req = parse_requirement(spec)
        provides[req.name] = req.version
    return provides


def build_template_pip_extras(name: str) -> dict[str, tuple[str, ...]]:
    """What the template installs beside a pip package it is asked for (template.yaml `pip_extras`)."""
    data = template_meta(name) or {}
    return {pkg: tuple(more) for pkg, more in (data.get("pip_extras") or {}).items()}


@dataclass(frozen=True)
class Carries:
    """What an environment is known to carry (requirement profiles: openmpi, mpi, deepspeed, mpi4py...)."""

    provides: frozenset[str]
    complete: bool   # True: what is not listed is absent (a custom image carries only what it declares)
    evidence: str
    package_files: tuple[str, ...] = ()   # conda/pip files read for what they install (a package goes there)


def _declared(env: Environment) -> set[str]:
    return {parse_requirement(s).name for s in env.requires if _parses(s)}




_READ_LIMIT = 1_000_000  # bytes of a conda file or training script read for what it names


def project_text(path: Path, root: Path) -> str | None:
    """The start of a regular file inside the stack's project (never through a symlink out of it), or None."""
    if not (inside(path, root) and path.is_file()):
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read(_READ_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        return None


def conda_document(path: Path, root: Path) -> tuple[object, list[Diagnostic]]:
    """A conda file read as the stack itself is (stack/source.py): nesting, values and the text its aliases
    expand to bounded, so a small file of YAML aliases cannot keep validate walking for minutes; `${` is text.
    Returns (the document, or None; the loader's diagnostics when it refused the file)."""
    text = project_text(path, root)
    if not text or not text.strip():
        return None, []
    data, refused = _conda_yaml(text, str(path))
    return data, list(refused)


@lru_cache(maxsize=8)
def _conda_yaml(text: str, file: str) -> tuple[object, tuple[Diagnostic, ...]]:
    """Read once per content: the rules that look at an environment's conda file share the reading (read only)."""
    try:
        return load_yaml(text, file, interpolate=False)[0], ()
    except DiagnosticError as exc:
        return None, tuple(exc.diagnostics)


def _conda_packages(path: Path, root: Path) -> set[str]:
    """Package names a conda file installs (conda and pip sections); nothing if it cannot be read."""
    data, _ = conda_document(path, root)
    return _conda_document_packages(data)


def _conda_document_packages(data: Any) -> set[str]:
    """Package names a conda YAML document (read from a file, or written inline) installs."""
    out: set[str] = set()
    deps = data.get("dependencies") if isinstance(data, dict) else None
    for dep in deps if isinstance(deps, list) else []:
        if isinstance(dep, str):
            out.add(pip_name(dep.split("::")[-1]))
        elif isinstance(dep, dict):
            pip = dep.get("pip")
            out.update(pip_name(p) for p in (pip if isinstance(pip, list) else []) if isinstance(p, str))
    return out


def _pip_requirements(path: Path, root: Path) -> set[str]:
    """Package names a pip requirements file installs (options, -r includes and comments skipped)."""
    text = project_text(path, root) or ""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return {pip_name(line) for line in lines if line and not line.startswith("-")}


def _build_context_carries(env: Environment, base_dir: Path, root: Path) -> tuple[set[str], str, list[str]]:
    """What an image built from a `build: {path}` context carries: its Dockerfile's final base image as
    curated_environments.yaml knows it, the conda and pip files it copies in, and what `RUN pip install` names.
    Returns (provides, evidence, the package files read, relative to the stack)."""
    context = base_dir / env.build.path
    dockerfile = context / env.build.dockerfile_path
    text = project_text(dockerfile, root) if inside(dockerfile, context) else None
    if text is None:
        return set(), "a custom image carries only what it declares", []
    facts = read_dockerfile(text)
    provides = {pip_name(p) for p in facts.pip_installs}
    evidence = f"{env.build.path}/{env.build.dockerfile_path} builds FROM {facts.base_image or 'an unknown base'}"
    image = image_info(facts.base_image) if facts.base_image else None
    if image is not None:
        provides |= set(image.provides)
        evidence += f" ({image.source})"
    files = []
    for copied in facts.copied:
        source = context / copied
        if not (inside(source, context) and source.is_file()):
            continue
        name = source.name.lower()
        if name.endswith((".yml", ".yaml")):
            provides |= _conda_packages(source, root)
        elif name.endswith(".txt") and "requirement" in name:
            provides |= _pip_requirements(source, root)
        else:
            continue
        files.append(posixpath.normpath(f"{env.build.path}/{copied}"))
    return provides, evidence, files


def environment_carries(env: Environment, base_dir: Path, root: Path) -> Carries:
    """What the environment carries, from validators/curated_environments.yaml (curated environments and
    AzureML base images), our Dockerfile templates, a conda file and the environment's own `requires:`."""
    declared = _declared(env)
    if env.curated:
        info = curated_info(env.curated)
        if info is None:
            return Carries(frozenset(declared), False,
                           f"curated environment {env.curated!r} is not in validators/curated_environments.yaml")
        return Carries(frozenset(info.provides) | declared, False, info.source)
    provides = set(declared)
    evidence = "declared in requires" if declared else "a custom image carries only what it declares"
    if env.image:
        image = image_info(env.image)
        if image is not None:
            provides |= set(image.provides)
            evidence = image.source
    if env.build and env.build.template:
        template = build_template_provides(env.build.template) or {}
        provides |= set(template)
        pip = {pip_name(p) for p in (env.build.parameters.get("pip_packages") or []) if isinstance(p, str)}
        provides |= pip | {extra for p in pip for extra in build_template_pip_extras(env.build.template).get(p, ())}
        evidence = f"templates/docker/{env.build.template} installs it"
    files: list[str] = []
    if env.build and env.build.remote:
        evidence = (f"the remote build context {env.build.path} is not read here: it carries only what it declares "
                    "in requires") if not declared else "declared in requires (a remote build context is not read)"
    elif env.build and env.build.path:
        built, evidence, files = _build_context_carries(env, base_dir, root)
        provides |= built
    if env.conda_path and project_text(base_dir / env.conda_path, root) is not None:
        provides |= _conda_packages(base_dir / env.conda_path, root)
        files.append(env.conda_path)
    elif isinstance(env.conda_file, dict):
        provides |= _conda_document_packages(env.conda_file)
        files.append("the environment's inline conda_file")
    return Carries(frozenset(provides), True, evidence, tuple(files))


def _parses(spec: str) -> bool:
    try:
        parse_requirement(spec)
        return True
    except SpecError:
        return False
