"""Dockerfile templates' metadata (templates/docker/NAME/template.yaml): their parameters, defaults and checks.

Read by validate (a stack's `build.template` parameters) and by image/dockerfile.py, which renders them.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.paths import templates_dir

_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def template_dir(template_name: str) -> Path:
    return templates_dir() / "docker" / template_name


def load_template_meta(template_name: str) -> dict:
    meta = template_dir(template_name) / "template.yaml"
    if not meta.is_file() or not (meta.parent / "Dockerfile.j2").is_file():
        known = sorted(p.name for p in (templates_dir() / "docker").glob("*") if (p / "Dockerfile.j2").is_file())
        raise DiagnosticError([Diagnostic("error", "build.template", f"no Dockerfile template {template_name!r}",
                                          file=str(meta), hint=f"known templates: {', '.join(known) or 'none'}")])
    with open(meta, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def _bad(meta_file: Path, message: str, hint: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic("error", "build.parameters", message, file=str(meta_file), hint=hint)])


def template_parameters(template_name: str, parameters: dict) -> dict:
    """The template's defaults overlaid with `parameters`; unknown names and bad values are refused."""
    meta = load_template_meta(template_name)
    declared = meta.get("parameters") or {}
    meta_file = template_dir(template_name) / "template.yaml"
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise _bad(meta_file, f"template {template_name!r} has no parameter(s) {', '.join(unknown)}",
                   f"known parameters: {', '.join(declared)}")
    values = {name: spec.get("default") for name, spec in declared.items()}
    values.update(parameters)
    source = str(values.get("openmpi_source", "distro"))
    if "openmpi_source" in values and source != "distro" and not _VERSION.match(source):
        raise _bad(meta_file, f"openmpi_source {source!r} is neither 'distro' nor a version like 4.1.6",
                   "use openmpi_source: distro, or a released Open MPI version X.Y.Z")
    if not isinstance(values.get("pip_packages", []), list):
        raise _bad(meta_file, "pip_packages must be a list", "e.g. pip_packages: [deepspeed, mpi4py]")
    return values
