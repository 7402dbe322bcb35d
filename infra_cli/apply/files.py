"""`infra render`: a valid stack -> the files `az ml compute create -f` / `az ml environment create -f` take.

Layout under the output directory:
    clusters/NAME.yml                       amlCompute YAML
    environments/NAME.yml                   environment YAML (image or build)
    environments/NAME/                      its assets: the copied conda file, the build context
    environments/NAME.curated.txt           curated environments are referenced, not created
    jobs/...                                smoke and training jobs (infra_cli.smoke.job_templates)

Secrets (ssh_settings.admin_password, ssh_settings.ssh_key_value) are never written: the file says how to
pass them with `--set`.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.image.api import render_dockerfile
from infra_cli.knowledge.curated import parse_environment_reference
from infra_cli.paths import copy_no_wider, stage_context
from infra_cli.smoke.api import render_distribution_jobs
from infra_cli.stack.cluster_fields import RENDER, path_value, rows
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import AML_ENVIRONMENT_SCHEMA, Cluster, Environment
from infra_cli.validate.engine import load_valid_stack

COMPUTE_SCHEMA = "https://azuremlschemas.azureedge.net/latest/amlCompute.schema.json"
SECRET_SSH_FIELDS = ("admin_password", "ssh_key_value")


def compute_document(name: str, cluster: Cluster) -> dict[str, Any]:
    """The Azure ML CLI v2 amlCompute document of a cluster, without secrets or our own additions: the fields
    stack/cluster_fields.py renders, in its order, each under its stack path."""
    doc: dict[str, Any] = {"$schema": COMPUTE_SCHEMA, "name": name, "type": "amlcompute"}
    for field in rows(RENDER):
        if field.render == "section":  # e.g. network_settings, identity: the section as written
            section = field.stack.split(".")[0]
            value = getattr(cluster, section)
            if value is not None and section not in doc:
                doc[section] = value.model_dump(exclude_none=True)
            continue
        value = path_value(cluster, field.stack)
        if field.render == "always" or (value if field.render == "if_set" else value is not None):
            *parents, leaf = field.stack.split(".")
            target = doc
            for parent in parents:
                target = target.setdefault(parent, {})
            target[leaf] = dict(value) if isinstance(value, dict) else value
    return doc


def _secret_note(name: str, cluster: Cluster) -> str:
    ssh = cluster.ssh_settings
    given = [f for f in SECRET_SSH_FIELDS if ssh is not None and getattr(ssh, f) is not None]
    if not given:
        return ""
    sets = " ".join(f"--set ssh_settings.{f}=\"$VALUE\"" for f in given)
    return (f"# Secrets left out on purpose: ssh_settings.{', ssh_settings.'.join(given)}.\n"
            f"# Pass them when creating: az ml compute create -f clusters/{name}.yml {sets}\n")


def _environment_base(name: str, env: Environment) -> dict[str, Any]:
    doc: dict[str, Any] = {"$schema": AML_ENVIRONMENT_SCHEMA, "name": name}
    if env.version is not None:
        doc["version"] = env.version
    if env.description:
        doc["description"] = env.description
    if env.tags:
        doc["tags"] = dict(env.tags)
    doc["os_type"] = env.os_type
    return doc


def _render_template_context(env: Environment, context: Path) -> None:
    """Write the template's Dockerfile into `context`."""
    context.mkdir(parents=True, exist_ok=True)
    (context / "Dockerfile").write_text(render_dockerfile(env.build.template, dict(env.build.parameters)),
                                        encoding="utf-8")


class _Writer:
    """Writes files under one output directory and remembers what it wrote (in order)."""

    def __init__(self, out_dir: Path):
        self.out = out_dir
        self.written: list[Path] = []

    def yaml(self, relative: str, doc: dict[str, Any], header: str = "") -> None:
        self.text(relative, header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))

    def text(self, relative: str, content: str) -> None:
        path = self.out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        self.written.append(path)

    def copy_file(self, source: Path, relative: str) -> None:
        path = self.out / relative
        copy_no_wider(source, path)  # a 0600 file stays 0600 in the output
        self.written.append(path)

    def copy_tree(self, source: Path, relative: str) -> None:
        """The context as it is uploaded (paths.context_files): no symlink followed out of it, ignored files
        left out, modes no wider than the source's."""
        path = self.out / relative
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        listing = stage_context(source, path)
        self.written.extend(path / f.relative for f in listing.files)


def _write_environment(w: _Writer, loaded: LoadedStack, name: str, env: Environment) -> None:
    header = f"# az ml environment create -f environments/{name}.yml\n"
    if env.curated:
        w.text(f"environments/{name}.curated.txt",
               f"Environment {name!r} is the curated Azure ML environment {env.curated}.\n"
               "Curated environments are referenced by jobs, not created: nothing to `az ml environment create`.\n"
               f"What it names now: {_show_command(env.curated)}\n")
        return
    doc = _environment_base(name, env)
    if env.image:
        doc["image"] = env.image
        if env.conda_path:
            conda = f"{name}/{Path(env.conda_path).name}"
            w.copy_file(loaded.base_dir / env.conda_path, f"environments/{conda}")
            doc["conda_file"] = conda
        elif env.inline_conda:  # written inline: rendered to a file, as `az ml environment create -f` reads it
            conda = f"{name}/conda.yml"
            w.text(f"environments/{conda}", env.inline_conda)
            doc["conda_file"] = conda
    elif env.build.path:
        w.copy_tree(loaded.base_dir / env.build.path, f"environments/{name}/context")
        doc["build"] = {"path": f"{name}/context", "dockerfile_path": env.build.dockerfile_path}
    else:
        _render_template_context(env, w.out / "environments" / name / "context")
        w.written.append(w.out / "environments" / name / "context" / "Dockerfile")
        doc["build"] = {"path": f"{name}/context", "dockerfile_path": "Dockerfile"}
    w.yaml(f"environments/{name}.yml", doc, header)
    return None


def _show_command(reference: str) -> str:
    """The az ml command that shows what an environment reference resolves to (a label to its version)."""
    ref = parse_environment_reference(reference)
    q = shlex.quote  # a command to paste: each value one shell word
    where = f"--registry-name {q(ref.registry)}" if ref.registry else "--resource-group RG --workspace-name WS"
    which = f"--version {q(ref.version)}" if ref.version else f"--label {q(ref.label)}"
    return f"az ml environment show --name {q(ref.name)} {which} {where}"


def _write_jobs(w: _Writer, loaded: LoadedStack) -> None:
    w.written.extend(Path(p) for p in render_distribution_jobs(loaded, w.out))


def render_stack(stack_path: str | Path, out_dir: str | Path) -> tuple[list[Path], list[Diagnostic]]:
    """Validate the stack and write its Azure ML CLI v2 files; returns (written paths, warnings).

    Raises DiagnosticError (nothing written) when the stack has errors.
    """
    loaded, warnings = load_valid_stack(Path(stack_path))
    w = _Writer(Path(out_dir))
    try:
        for name, cluster in loaded.stack.clusters.items():
            w.yaml(f"clusters/{name}.yml", compute_document(name, cluster),
                   f"# az ml compute create -f clusters/{name}.yml\n" + _secret_note(name, cluster))
        for name, env in loaded.stack.environments.items():
            _write_environment(w, loaded, name, env)
        _write_jobs(w, loaded)
    except OSError as exc:
        raise DiagnosticError([Diagnostic("error", "render.write", f"cannot write {exc.filename or out_dir}: "
                                          f"{exc.strerror or exc}", str(out_dir), None, None,
                                          "pass an --out directory you can write to")]) from None
    return w.written, warnings
