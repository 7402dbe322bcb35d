"""The Dockerfiles `build: {template}` environments render to, judged as validate judges a build context's:
each RUN step's needs met by the base image or an earlier step (validate/build_steps.py). Judged here and by
`infra render`, not by validate: rendering a template needs jinja2, which `infra validate` never imports."""

from __future__ import annotations

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.image.api import render_dockerfile
from infra_cli.stack.load import LoadedStack
from infra_cli.validate.build_steps import build_step_problems


def template_build_diagnostics(loaded: LoadedStack) -> list[Diagnostic]:
    """An error at `environments.NAME.build` for each RUN step of a rendered template that could not run."""
    out = []
    for name, env in loaded.stack.environments.items():
        if not (env.build and env.build.template):
            continue
        try:
            text = render_dockerfile(env.build.template, dict(env.build.parameters))
        except DiagnosticError:   # validate reports the template's name and parameters
            continue
        template = f"templates/docker/{env.build.template}"
        for p in build_step_problems(text):
            out.append(loaded.source.diagnostic(
                ("environments", name, "build"), "environment.build-step",
                f"environment {name!r}: the Dockerfile rendered from {template} (what Azure ML would build), "
                f"line {p.line}: {p.message}",
                f"{p.hint}; for a template, set it in environments.{name}.build.parameters: a pip package in "
                f"pip_packages ({template}/template.yaml installs its pip_first ones in a step before the others), "
                "or a base_image that provides it"))
    return out
