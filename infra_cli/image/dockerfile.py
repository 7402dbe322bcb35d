"""Dockerfiles from templates/docker/NAME/{template.yaml,Dockerfile.j2} (used by `infra render` and apply).

jinja2 is imported only when a Dockerfile is rendered.
"""

from __future__ import annotations

import hashlib

from infra_cli.knowledge.docker_templates import load_template_meta, template_dir, template_parameters

__all__ = ["load_template_meta", "render_dockerfile", "template_dir", "template_parameters"]


def render_dockerfile(template_name: str, parameters: dict) -> str:
    import jinja2

    values = template_parameters(template_name, dict(parameters or {}))
    meta = load_template_meta(template_name)
    source = (template_dir(template_name) / "Dockerfile.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, autoescape=False)
    openmpi = str(values.get("openmpi_source", "distro"))
    context = {**values, "packages": meta.get("packages") or {},
               "openmpi_series": ".".join(openmpi.split(".")[:2]),
               "template_digest": "sha256:" + hashlib.sha256(source.encode()).hexdigest()[:12]}
    return env.from_string(source).render(**context)
