"""Dockerfile templates' metadata (templates/docker/NAME/template.yaml): their parameters, defaults and checks.

Read by validate (a stack's `build.template` parameters) and by image/dockerfile.py, which renders them.
Every parameter a template declares names its `grammar` (one of GRAMMARS): a value is held to it at
`infra validate` (a diagnostic at the value) and again when the Dockerfile is rendered (nothing rendered),
so no value reaches a Dockerfile or a shell line as anything but data. A parameter without a known grammar
is a broken template, refused before any value is read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.grammars import (
    git_ref_problem, https_url_problem, image_reference_problem, pip_requirement_problem, text_problem,
    version_problem)
from infra_cli.paths import inside, templates_dir


@dataclass(frozen=True)
class ParameterProblem:
    """A value a template parameter's grammar refuses; `where` is its place under `parameters` (name[, index])."""
    where: tuple
    message: str
    hint: str


Problems = Iterator[tuple[tuple, str]]   # (place under the parameter, what is wrong)


def _one(check: Callable[[Any], str | None]) -> Callable[[Any], Problems]:
    def judge(value: Any) -> Problems:
        problem = check(value)
        if problem:
            yield (), problem
    return judge


def _pip_requirements(value: Any) -> Problems:
    if not isinstance(value, list):
        yield (), "pip_packages must be a list"
        return
    for i, spec in enumerate(value):
        problem = pip_requirement_problem(spec)
        if problem:
            yield (i,), problem


def _boolean(value: Any) -> Problems:
    if not isinstance(value, bool):
        yield (), f"{value!r} is not true or false"


def _openmpi_source(value: Any) -> Problems:
    if value != "distro" and version_problem(value):
        yield (), f"openmpi_source {value!r} is neither 'distro' nor a version like 4.1.6"


def _optional(check: Callable[[Any], str | None]) -> Callable[[Any], Problems]:
    return _one(lambda v: None if v in ("", None) else check(v))


# grammar name (template.yaml `grammar:`) -> (judge, how to fix)
GRAMMARS: dict[str, tuple[Callable[[Any], Problems], str]] = {
    "image_reference": (_one(image_reference_problem),
                        "write an image reference such as nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04 "
                        "(host/repository:tag or @sha256:...), one line"),
    "openmpi_source": (_openmpi_source, "use openmpi_source: distro, or a released Open MPI version X.Y.Z"),
    "pip_requirements": (_pip_requirements,
                         "a list of PEP 508 requirements such as deepspeed, mpi4py==4.1.2 or 'torch>=2.1' "
                         "(https://peps.python.org/pep-0508/); pip options are not requirements"),
    "https_url_or_empty": (_optional(https_url_problem), "an https:// URL, or \"\" for none"),
    "boolean": (_boolean, "write true or false"),
    "git_ref": (_one(git_ref_problem), "a git tag or branch name, e.g. v2.5-1"),
    "text": (_one(text_problem), "one line of text"),
}


# A template is named, never pathed: a folder of templates/docker/, so `../../x` or `/tmp/x` can never load a
# Dockerfile.j2 (nor its `provides:`) from elsewhere.
TEMPLATE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
TEMPLATE_NAME_HINT = ("build.template names a folder of templates/docker/ (lower-case letters, digits and '-', "
                      "e.g. openmpi-rdma), not a path; for your own Dockerfile use build: {path: DIR}")


def template_name_problem(template_name: object) -> str | None:
    """Why `template_name` is not a template's name (None when it is one: it need not exist)."""
    if isinstance(template_name, str) and TEMPLATE_NAME.fullmatch(template_name):
        return None
    return f"{template_name!r} is not a template name"


def template_dir(template_name: str) -> Path:
    """templates/docker/NAME. A name that is not one (a path, `..`) or whose folder is a link out of
    templates/docker is refused (DiagnosticError build.template)."""
    problem = template_name_problem(template_name)
    folder = templates_dir() / "docker"
    if problem is None and os.path.lexists(folder / template_name) and not inside(folder / template_name, folder):
        problem = f"templates/docker/{template_name} leads out of templates/docker"
    if problem:
        raise DiagnosticError([Diagnostic("error", "build.template", problem, hint=TEMPLATE_NAME_HINT)])
    return folder / template_name


def template_meta(template_name: str) -> dict | None:
    """templates/docker/NAME/template.yaml, or None where the template has none or NAME is no template's name
    (validate says so)."""
    try:
        meta = template_dir(template_name) / "template.yaml"
    except DiagnosticError:
        return None
    if not meta.is_file():
        return None
    with open(meta, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def described_templates() -> list[str]:
    """The names of the templates that have a template.yaml, sorted."""
    folder = templates_dir() / "docker"
    return sorted(p.name for p in folder.glob("*") if template_meta(p.name) is not None) if folder.is_dir() else []


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


def _declared(template_name: str, meta: dict) -> dict[str, dict]:
    """The template's parameters, each with a known grammar (else the template itself is refused)."""
    declared = meta.get("parameters") or {}
    meta_file = template_dir(template_name) / "template.yaml"
    for name, spec in declared.items():
        if not isinstance(spec, dict) or spec.get("grammar") not in GRAMMARS:
            raise DiagnosticError([Diagnostic(
                "error", "knowledge.invalid", f"template parameter {name!r} names no known grammar",
                file=str(meta_file), hint=f"give it `grammar:` one of {', '.join(GRAMMARS)}")])
    return declared


def parameter_problems(template_name: str, parameters: dict) -> tuple[dict, list[ParameterProblem]]:
    """The template's defaults overlaid with `parameters`, and every value its grammar refuses (unknown
    names included, at the name)."""
    declared = _declared(template_name, load_template_meta(template_name))
    unknown = [name for name in parameters if name not in declared]
    problems = [ParameterProblem((), f"template {template_name!r} has no parameter(s) {', '.join(map(str, unknown))}",
                                 f"known parameters: {', '.join(declared)}")] if unknown else []
    values = {name: spec.get("default") for name, spec in declared.items()}
    values.update(parameters)
    for name, spec in declared.items():
        judge, hint = GRAMMARS[spec["grammar"]]
        problems += [ParameterProblem((name, *where), message if message.startswith(name) else f"{name}: {message}",
                                      hint) for where, message in judge(values[name])]
    return values, problems


def template_parameters(template_name: str, parameters: dict) -> dict:
    """The template's defaults overlaid with `parameters`; unknown names and values their grammar refuses
    raise DiagnosticError (one diagnostic each)."""
    values, problems = parameter_problems(template_name, parameters)
    if problems:
        meta_file = template_dir(template_name) / "template.yaml"
        raise DiagnosticError([Diagnostic("error", "build.parameters", p.message, file=str(meta_file), hint=p.hint)
                               for p in problems])
    return values
