"""Dockerfiles from templates/docker/NAME/{template.yaml,Dockerfile.j2} (used by `infra render` and apply).

A rendered Dockerfile holds the stack's values as data, never as code. Values are held to their grammar
before rendering (knowledge/docker_templates.py); then, whatever reached the template: every `{{ }}` that
would write a control character (a newline would start a new instruction) stops the render, `FROM` takes
only an image reference (filter `image`), and a value on a RUN line is one shell word (filter `sh`,
shlex.quote: https://docs.python.org/3/library/shlex.html#shlex.quote). Templates are rendered in Jinja2's
sandbox, and only from templates/docker/NAME (knowledge/docker_templates.py: a name, never a path).

jinja2 is imported only when a Dockerfile is rendered.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.docker_templates import load_template_meta, template_dir, template_parameters
from infra_cli.knowledge.grammars import image_reference_problem, text_problem


def _refused(template_name: str, problem: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic(
        "error", "build.parameters", f"not rendered into a Dockerfile: {problem}",
        file=str(template_dir(template_name) / "Dockerfile.j2"),
        hint="a template value is one line of plain text; fix the stack's build.parameters")])


def _filters(template_name: str) -> dict[str, Any]:
    def one_line(value: Any) -> Any:      # jinja2's finalize: every value any {{ }} writes
        problem = text_problem(value) if isinstance(value, str) else None
        if problem:
            raise _refused(template_name, problem)
        return value

    def sh(value: Any) -> str:
        text = str(value)
        one_line(text)
        return shlex.quote(text)

    def image(value: Any) -> str:
        problem = image_reference_problem(value)
        if problem:
            raise _refused(template_name, problem)
        return value

    return {"finalize": one_line, "sh": sh, "image": image}


def render_dockerfile(template_name: str, parameters: dict) -> str:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    values = template_parameters(template_name, dict(parameters or {}))
    meta = load_template_meta(template_name)
    source = (template_dir(template_name) / "Dockerfile.j2").read_text(encoding="utf-8")
    guards = _filters(template_name)
    # sandboxed (https://jinja.palletsprojects.com/en/stable/sandbox/): a template sees the stack's values, and
    # no template reaches Python's internals (`cycler.__init__.__globals__`) whatever it holds
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                               lstrip_blocks=True, autoescape=False, finalize=guards.pop("finalize"))
    env.filters.update(guards)
    openmpi = str(values.get("openmpi_source", "distro"))
    context = {**values, "packages": meta.get("packages") or {}, "pip_first": meta.get("pip_first") or [],
               "pip_extras": meta.get("pip_extras") or {},
               "openmpi_series": ".".join(openmpi.split(".")[:2]),
               "template_digest": "sha256:" + hashlib.sha256(source.encode()).hexdigest()[:12]}
    try:
        return env.from_string(source).render(**context)
    except jinja2.TemplateError as exc:   # a broken template, or one the sandbox stopped (jinja2's SecurityError)
        raise DiagnosticError([Diagnostic(
            "error", "build.template", f"template {template_name!r} cannot be rendered: {type(exc).__name__}: {exc}",
            file=str(template_dir(template_name) / "Dockerfile.j2"),
            hint="fix the template (it runs in Jinja2's sandbox: no attribute starting with '_' is reachable)")]) from None
