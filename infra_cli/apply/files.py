"""`infra render`: a valid stack -> the files `az ml compute create -f` / `az ml environment create -f` take.

Layout under the output directory:
    clusters/NAME.yml                       amlCompute YAML
    environments/NAME.yml                   environment YAML (image or build)
    environments/NAME/                      its assets: the copied conda file, the build context
    environments/NAME.curated.txt           curated environments are referenced, not created
    jobs/...  code/...                      smoke and training jobs, a training job's code (smoke/job_templates.py)
    .infra-render.json                      the manifest: every file render wrote, with its sha256

What render writes never harms what it reads: an output directory that is, holds or lies inside a file or
folder the stack reads (the stack, its conda files, build contexts, code, infra's templates) is refused before
anything is written; every file is written beneath the output directory through no symbolic link
(paths.write_beneath: a link at a file's place is replaced, never written through, and a link on the way is
refused before anything is written); and a re-render removes the files of the previous manifest the stack no
longer has, only while each is still exactly what render wrote.

Secrets (ssh_settings.admin_password, ssh_settings.ssh_key_value) are never written: the file says how to
pass them with `--set`.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Iterator

import yaml

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.image.api import render_dockerfile
from infra_cli.knowledge.curated import parse_environment_reference
from infra_cli.knowledge.docker_templates import template_dir
from infra_cli.plan.api import template_build_diagnostics
from infra_cli.paths import (
    OutputFile, context_files, link_on_the_way, local_project, project_root, read_beneath, remove_beneath, templates_dir,
    write_beneath)
from infra_cli.smoke.api import distribution_job_files
from infra_cli.stack.cluster_fields import RENDER, path_value, rows
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import AML_ENVIRONMENT_SCHEMA, Cluster, Environment
from infra_cli.validate.engine import load_valid_stack

MANIFEST = ".infra-render.json"
MANIFEST_FORMAT = 1
MANIFEST_LIMIT = 16 << 20   # a manifest larger than this was not written by render: it is not read
_SHA256 = re.compile(r"[0-9a-f]{64}")
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


def _environment_files(loaded: LoadedStack, name: str, env: Environment) -> list[OutputFile]:
    if env.curated:
        return [OutputFile(f"environments/{name}.curated.txt",
                           f"Environment {name!r} is the curated Azure ML environment {env.curated}.\n"
                           "Curated environments are referenced by jobs, not created: nothing to `az ml environment "
                           f"create`.\nWhat it names now: {_show_command(env.curated)}\n")]
    files: list[OutputFile] = []
    doc = _environment_base(name, env)
    if env.image:
        doc["image"] = env.image
        if env.conda_path:
            conda = f"{name}/{Path(env.conda_path).name}"
            files.append(OutputFile(f"environments/{conda}", source=loaded.base_dir / env.conda_path))
            doc["conda_file"] = conda
        elif env.inline_conda:  # written inline: rendered to a file, as `az ml environment create -f` reads it
            conda = f"{name}/conda.yml"
            files.append(OutputFile(f"environments/{conda}", env.inline_conda))
            doc["conda_file"] = conda
    elif env.build.path:
        # the context as it is uploaded (paths.context_files): no symlink followed out of it, ignored files left
        # out; modes no wider than the source's
        files += [OutputFile(f"environments/{name}/context/{f.relative}", source=f.source)
                  for f in context_files(loaded.base_dir / env.build.path).files]
        doc["build"] = {"path": f"{name}/context", "dockerfile_path": env.build.dockerfile_path}
    else:
        files.append(OutputFile(f"environments/{name}/context/Dockerfile",
                                render_dockerfile(env.build.template, dict(env.build.parameters))))
        doc["build"] = {"path": f"{name}/context", "dockerfile_path": "Dockerfile"}
    header = f"# az ml environment create -f environments/{name}.yml\n"
    files.append(OutputFile(f"environments/{name}.yml", header + _yaml(doc)))
    return files


def _yaml(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _show_command(reference: str) -> str:
    """The az ml command that shows what an environment reference resolves to (a label to its version)."""
    ref = parse_environment_reference(reference)
    q = shlex.quote  # a command to paste: each value one shell word
    where = f"--registry-name {q(ref.registry)}" if ref.registry else "--resource-group RG --workspace-name WS"
    which = f"--version {q(ref.version)}" if ref.version else f"--label {q(ref.label)}"
    return f"az ml environment show --name {q(ref.name)} {which} {where}"


def _outputs(loaded: LoadedStack) -> list[OutputFile]:
    """Every file of the stack's render, in order (nothing written yet: a template that refuses a value stops
    the render before the output directory is touched)."""
    files = [OutputFile(f"clusters/{name}.yml", f"# az ml compute create -f clusters/{name}.yml\n"
                        + _secret_note(name, cluster) + _yaml(compute_document(name, cluster)))
             for name, cluster in loaded.stack.clusters.items()]
    for name, env in loaded.stack.environments.items():
        files += _environment_files(loaded, name, env)
    return files + distribution_job_files(loaded)


# ---- what render reads: never under, over or in the output directory ----------------------------------------

def _sources(loaded: LoadedStack) -> Iterator[tuple[tuple | None, str, Path]]:
    """(where the stack names it, what it is, the path) for every file and folder render reads."""
    yield None, "the stack file", loaded.path
    base = loaded.base_dir
    for name, env in loaded.stack.environments.items():
        if env.conda_path:
            yield ("environments", name, "conda_file"), "the conda file", base / env.conda_path
        if env.build and env.build.path:
            yield ("environments", name, "build", "path"), "the build context", base / env.build.path
        if env.build and env.build.template:
            yield ("environments", name, "build", "template"), "the Dockerfile template", template_dir(env.build.template)
    for name, dist in loaded.stack.distributions.items():
        if dist.code:
            yield ("distributions", name, "code"), "the code folder", base / dist.code
    yield None, "infra's templates", templates_dir()


def _relation(out: Path, source: Path) -> str | None:
    if out == source:
        return "is"
    if source.is_relative_to(out):
        return "contains"
    if out.is_relative_to(source):
        return "lies inside"
    return None


def _overlaps(loaded: LoadedStack, out: Path) -> list[tuple[tuple | None, str, Path, str]]:
    found = []
    for where, what, path in _sources(loaded):
        relation = _relation(out, path.resolve())
        if relation:
            found.append((where, what, path, relation))
    return found


def _suggested_out(loaded: LoadedStack) -> str:
    """An output directory apart from every source and from what git tracks: .infra/render/STACK in the project
    (where `--local` keeps its state too; a folder a checkout ignores, as this repository's .gitignore does), else
    STACK-rendered beside the project (a `code:` folder that is the whole project holds .infra/)."""
    for candidate in (local_project(loaded.path) / ".infra" / "render" / loaded.path.stem,
                      project_root(loaded.path).parent / f"{loaded.path.stem}-rendered"):
        if not _overlaps(loaded, candidate.resolve()):
            shown = os.path.relpath(candidate)
            return shlex.quote(shown if not shown.startswith("../..") else str(candidate))
    return "DIR (a new folder outside the stack's project)"


def _refuse_overlap(loaded: LoadedStack, out_given: Path, out: Path) -> None:
    found = _overlaps(loaded, out)
    if not found:
        return
    hint = (f"render into a folder apart from what the stack reads, e.g. --out {_suggested_out(loaded)}; render "
            "writes clusters/, environments/, jobs/ and code/ there and removes the files it wrote before")
    diagnostics = []
    for where, what, path, relation in found:
        message = (f"--out {out_given} {relation} {what} {path}: render would overwrite or delete what it reads; "
                   "nothing was written")
        if where is None:
            diagnostics.append(Diagnostic("error", "render.out-overlaps-input", message,
                                          str(loaded.path) if what == "the stack file" else None, None, None, hint))
        else:
            diagnostics.append(loaded.source.diagnostic(where, "render.out-overlaps-input", message, hint))
    raise DiagnosticError(diagnostics)


# ---- the manifest: what render wrote, so a re-render removes exactly that -----------------------------------

def _previous_manifest(out: Path, warnings: list[Diagnostic]) -> dict[str, str]:
    """relative path -> sha256 of each file the previous render wrote ({} when there was none). A manifest that
    is not one render wrote (a link, unreadable, malformed entries) removes nothing, with a warning."""
    if not os.path.lexists(out / MANIFEST):
        return {}
    data = read_beneath(out, MANIFEST, MANIFEST_LIMIT)
    try:
        doc = json.loads(data) if data is not None and len(data) < MANIFEST_LIMIT else None
        files = doc["files"] if isinstance(doc, dict) and doc.get("format_version") == MANIFEST_FORMAT else None
        if not isinstance(files, dict):
            raise ValueError
        return {rel: sha for rel, sha in files.items()
                if isinstance(rel, str) and isinstance(sha, str) and _SHA256.fullmatch(sha) and _clean_relative(rel)}
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        warnings.append(Diagnostic("warning", "render.manifest-unreadable",
                                   f"{out / MANIFEST} is not a manifest infra render wrote: no file of an earlier "
                                   "render was removed", str(out / MANIFEST), None, None,
                                   "delete it (render writes a new one) and remove stale files by hand"))
        return {}


def _clean_relative(relative: str) -> bool:
    parts = relative.split("/")
    return relative != MANIFEST and all(p not in ("", ".", "..") for p in parts) and "\0" not in relative


def _manifest_text(stack: str, files: dict[str, str]) -> str:
    return json.dumps({"format_version": MANIFEST_FORMAT, "generator": "infra render", "stack": stack,
                       "files": files}, indent=1, sort_keys=True) + "\n"


def _remove_stale(out: Path, out_given: Path, previous: dict[str, str], current: dict[str, str]) -> list[Diagnostic]:
    notes = []
    for relative, sha in sorted(previous.items()):
        if relative in current:
            continue
        outcome = remove_beneath(out, relative, sha)
        if outcome == "removed":
            notes.append(Diagnostic("info", "render.removed", f"removed {out_given / relative}: an earlier render "
                                    "wrote it and the stack no longer has it"))
        elif outcome == "changed":
            notes.append(Diagnostic("warning", "render.stale-kept", f"{out_given / relative} was written by an "
                                    "earlier render for something the stack no longer has, but it changed since "
                                    "(content, or a link or folder now): left alone", str(out_given / relative),
                                    None, None, "delete it if you no longer need it"))
    return notes


def _write_error(exc: OSError, out_given: Path) -> DiagnosticError:
    return DiagnosticError([Diagnostic("error", "render.write", f"cannot write {exc.filename or out_given}: "
                                       f"{exc.strerror or exc}", str(out_given), None, None,
                                       "pass an --out directory you can write to")])


def render_stack(stack_path: str | Path, out_dir: str | Path) -> tuple[list[Path], list[Diagnostic]]:
    """Validate the stack and write its Azure ML CLI v2 files; returns (written paths, warnings and notes).

    Raises DiagnosticError, with nothing written, when the stack has errors, when the output directory is, holds
    or lies inside something the stack reads, or when a symbolic link or a non-directory is on the way to a file.
    """
    loaded, warnings = load_valid_stack(Path(stack_path))
    unbuildable = template_build_diagnostics(loaded)   # a Dockerfile Azure ML could not build is not written
    if unbuildable:
        raise DiagnosticError(warnings + unbuildable)
    out_given = Path(out_dir)
    out = out_given.resolve()   # the directory the user named (a link to it is theirs); below it no link is followed
    _refuse_overlap(loaded, out_given, out)
    if os.path.lexists(out) and not out.is_dir():
        raise _write_error(NotADirectoryError(errno.ENOTDIR, "not a directory", str(out_given)), out_given)
    outputs = _outputs(loaded)
    in_the_way = [why for f in [*outputs, OutputFile(MANIFEST)] if (why := link_on_the_way(out, f.relative))]
    if in_the_way:
        raise DiagnosticError([Diagnostic(
            "error", "render.output-link", f"{why}: render writes no file through a link or over a folder in its "
            "output directory; nothing was written", str(out_given), None, None,
            "remove it, or render into a fresh --out directory") for why in dict.fromkeys(in_the_way)])
    diagnostics = list(warnings)
    previous = _previous_manifest(out, diagnostics) if out.is_dir() else {}
    written: dict[str, str] = {}
    try:
        out.mkdir(parents=True, exist_ok=True)
        try:
            for f in outputs:
                written[f.relative] = write_beneath(out, f)
        except BaseException:
            # what render wrote so far stays listed with the earlier render's, so the next render removes it
            write_beneath(out, OutputFile(MANIFEST, _manifest_text(loaded.stack.stack, {**previous, **written})))
            raise
        diagnostics += _remove_stale(out, out_given, previous, written)
        write_beneath(out, OutputFile(MANIFEST, _manifest_text(loaded.stack.stack, written)))
    except OSError as exc:
        raise _write_error(exc, out_given) from None
    return [out_given / relative for relative in written], diagnostics
