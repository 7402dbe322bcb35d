"""Rules on each environment: its name, `requires:`, the files it reads (conda file, build context, the
upload limits a build context or a distribution's code directory meets), its build template and steps, its
image reference."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.docker_templates import (
    TEMPLATE_NAME_HINT, described_templates, parameter_problems, template_dir)
from infra_cli.knowledge.grammars import REFERENCE_GRAMMAR, image_reference_problem
from infra_cli.knowledge.requirements import SpecError, parse_requirement
from infra_cli.build_context import context_files
from infra_cli.paths import inside, project_root
from infra_cli.stack.model import Distribution, Environment
from infra_cli.validate.build_steps import build_step_problems
from infra_cli.validate.rules.carries import project_text, build_template_provides, conda_document
from infra_cli.validate.rules.registry import Context, declare, rule_for_each
from infra_cli.validate.rules.resources import pasted_name


NAME_MISMATCH = declare("environment.name-mismatch", "error",
                        "a pasted environment YAML's `name:` differs from its key under environments:")


@rule_for_each("environments", NAME_MISMATCH)
def environment_name(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    yield from pasted_name(ctx, "environments", name, env.name, "environment", NAME_MISMATCH.id)


REQUIRES_SPEC = declare("environment.requires-spec", "error",
                        "an entry of an environment's `requires:` is not a requirement spec")


@rule_for_each("environments", REQUIRES_SPEC)
def environment_requires(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    for i, spec in enumerate(env.requires):
        try:
            parse_requirement(spec)
        except SpecError as exc:
            yield ctx.at(("environments", name, "requires", i), REQUIRES_SPEC.id, str(exc),
                         "write a spec such as openmpi>=4.1, mpi, ibverbs, nccl>=2.18")


def _outside_project(ctx: Context, path: tuple, what: str, relative: str) -> Diagnostic | None:
    """A file the stack names must resolve, symlinks and `..` included, inside the stack's project: apply
    uploads it and render copies it, so `../../.ssh/id_rsa` or a link to /etc would leave the machine."""
    root = project_root(ctx.loaded.path)
    if inside(ctx.loaded.base_dir / relative, root):
        return None
    return ctx.at(path, OUTSIDE_PROJECT.id,
                  f"{what} {relative!r} resolves to {(ctx.loaded.base_dir / relative).resolve()}, outside the stack's "
                  f"project {root}", "keep the files a stack names inside its project (the git work tree that holds "
                  "the stack, else the stack's directory); copy them in instead of linking out")


# What Azure ML takes in one snapshot of a job's source directory: 300 MB and 2,000 files
# (https://learn.microsoft.com/azure/machine-learning/how-to-save-write-experiment-files?view=azureml-api-1#storage-limits-of-experiment-snapshots).
# A build context or code directory past either is uploaded whole before each build or job: a warning.
UPLOAD_WARN_BYTES = 300 * 1000 * 1000


UPLOAD_WARN_FILES = 2000


_UPLOAD_LIMITS_SOURCE = ("https://learn.microsoft.com/azure/machine-learning/how-to-save-write-experiment-files"
                         "?view=azureml-api-1#storage-limits-of-experiment-snapshots")


def _skipped_entries(ctx: Context, path: tuple, what: str, directory: Path) -> Iterator[Diagnostic]:
    listing = context_files(directory)
    size = 0
    for f in listing.files:   # sizes from the file system (a sparse file counts as what would be uploaded)
        try:
            size += f.source.stat().st_size
        except OSError:
            pass
    if size > UPLOAD_WARN_BYTES or len(listing.files) > UPLOAD_WARN_FILES:
        yield ctx.warning(path, CONTEXT_LARGE.id,
                          f"{what} {directory} holds {len(listing.files)} files, {size / 1e6:,.0f} MB: more than the "
                          f"{UPLOAD_WARN_BYTES // 1000 ** 2} MB or {UPLOAD_WARN_FILES:,} files Azure ML takes in a "
                          f"snapshot ({_UPLOAD_LIMITS_SOURCE}), uploaded whole before every build or job",
                          "keep data and checkpoints out of it (list them in its .amlignore) and read them from a "
                          "datastore instead")
    if listing.skipped:
        more = len(listing.skipped) - 5
        shown = "; ".join(listing.skipped[:5]) + (f"; and {more} more" if more > 0 else "")
        yield ctx.warning(path, CONTEXT_SKIPPED.id, f"{what} {directory} has entries that are not uploaded: {shown}",
                     "symlinks are never followed out of a context (nor into directories); copy what is needed "
                     "into it, or list the entries in its .amlignore")


def _context_diagnostics(ctx: Context, path: tuple, context: Path, dockerfile_path: str) -> Iterator[Diagnostic]:
    if not inside(context / dockerfile_path, context):
        yield ctx.at(path[:-1] + ("dockerfile_path",), OUTSIDE_CONTEXT.id,
                     f"dockerfile_path {dockerfile_path!r} lies outside the build context {context}",
                     "Azure ML builds only from the uploaded context: put the Dockerfile inside build.path")
        return
    yield from _skipped_entries(ctx, path, "build context", context)


OUTSIDE_PROJECT = declare("paths.outside-project", "error",
                          "a file or folder the stack names resolves outside the stack's project")
FILE_MISSING = declare("environment.file-missing", "error",
                       "an environment's conda file, build context or Dockerfile does not exist")
CONDA_FILE = declare("environment.conda-file", "error",
                     "an environment's conda file is not YAML infra and Azure ML can read")
OUTSIDE_CONTEXT = declare("paths.outside-context", "error", "a build's dockerfile_path lies outside its build context")
CONTEXT_LARGE = declare("paths.context-large", "warning",
                        "a build context or code directory is larger than an Azure ML snapshot (300 MB or 2,000 files)")
CONTEXT_SKIPPED = declare("paths.context-skipped", "warning",
                          "a build context or code directory holds entries that are not uploaded (symlinks)")
TEMPLATE_NAME = declare("environment.template-name", "error",
                        "build.template is a path, not the name of a folder of templates/docker/")
TEMPLATE_UNKNOWN = declare("environment.template-unknown", "error",
                           "build.template names no Dockerfile template infra has")


@rule_for_each("environments", OUTSIDE_PROJECT, FILE_MISSING, CONDA_FILE, OUTSIDE_CONTEXT, CONTEXT_LARGE, CONTEXT_SKIPPED, TEMPLATE_NAME, TEMPLATE_UNKNOWN)
def environment_files(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    base = ctx.loaded.base_dir
    if env.conda_path:  # conda YAML written inline is no file
        where: tuple[str, ...] = ("environments", name, "conda_file")
        outside = _outside_project(ctx, where, "conda_file", env.conda_path)
        if outside is not None:
            yield outside
        elif not (base / env.conda_path).is_file():
            yield ctx.at(where, FILE_MISSING.id,
                         f"conda file {env.conda_path!r} does not exist (looked in {base})",
                         "conda_file is relative to the stack file, or write the conda YAML inline under it")
        else:
            for d in conda_document(base / env.conda_path, project_root(ctx.loaded.path))[1][:1]:
                place = ":".join(str(p) for p in (d.file, d.line, d.column) if p is not None)
                yield ctx.at(where, CONDA_FILE.id, f"conda file {env.conda_path!r} is refused: "
                             f"{d.message} (at {place})", d.hint or "fix the conda file")
    if env.build and env.build.local_path:   # a remote context (https://, azureml://) Azure ML fetches itself
        where = ("environments", name, "build", "path")
        context = base / env.build.path
        outside = _outside_project(ctx, where, "build.path", env.build.path)
        if outside is not None:
            yield outside
        elif not context.is_dir():
            yield ctx.at(where, FILE_MISSING.id,
                         f"build context {env.build.path!r} is not a directory (looked in {base})",
                         "build.path is relative to the stack file")
        elif not (context / env.build.dockerfile_path).is_file():
            # Azure ML uploads the whole directory before it finds there is nothing to build.
            yield ctx.at(where, FILE_MISSING.id,
                         f"build context {env.build.path!r} has no {env.build.dockerfile_path} "
                         f"(looked for {context / env.build.dockerfile_path})",
                         "point build.path at the directory that holds the Dockerfile, or set build.dockerfile_path")
        else:
            yield from _context_diagnostics(ctx, where, context, env.build.dockerfile_path)
    if env.build and env.build.template:
        yield from _template_name(ctx, name, env.build.template)


def _template_name(ctx: Context, name: str, template: str) -> Iterator[Diagnostic]:
    """build.template names a folder of templates/docker/ (never a path: `../../x` would load a Dockerfile.j2,
    and its `provides:`, from anywhere), and one that exists."""
    try:
        template_dir(template)
    except DiagnosticError as exc:
        yield ctx.at(("environments", name, "build", "template"), TEMPLATE_NAME.id,
                     exc.diagnostics[0].message, TEMPLATE_NAME_HINT)
        return
    if build_template_provides(template) is None:
        known = described_templates()
        yield ctx.at(("environments", name, "build", "template"), TEMPLATE_UNKNOWN.id,
                     f"no Dockerfile template named {template!r} in templates/docker/",
                     f"known templates: {', '.join(known) or '(none)'}")


@rule_for_each("distributions", OUTSIDE_PROJECT, CONTEXT_LARGE, CONTEXT_SKIPPED)
def code_paths(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    if dist.code:
        where = ("distributions", name, "code")
        outside = _outside_project(ctx, where, "code", dist.code)
        if outside is not None:
            yield outside
        elif (ctx.loaded.base_dir / dist.code).is_dir():  # `az ml job create` would follow its links out
            yield from _skipped_entries(ctx, where, "code directory", ctx.loaded.base_dir / dist.code)


TEMPLATE_PARAMETERS = declare("environment.template-parameters", "error",
                              "a build template's parameter is unknown or breaks the grammar its template.yaml names")


@rule_for_each("environments", TEMPLATE_PARAMETERS)
def environment_template_parameters(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    if not (env.build and env.build.template) or build_template_provides(env.build.template) is None:
        return  # no template: environment_files reports it
    """Each parameter held to the grammar its template.yaml names (an image reference, PEP 508, a version,
    a URL, ...; no control characters), pointed at the value at fault: nothing reaches a Dockerfile as code."""
    try:
        _, problems = parameter_problems(env.build.template, dict(env.build.parameters))
    except DiagnosticError as exc:  # a broken template.yaml: its own diagnostic
        yield from exc.diagnostics
        return
    for p in problems:
        yield ctx.at(("environments", name, "build", "parameters", *p.where), TEMPLATE_PARAMETERS.id,
                     p.message, p.hint)


BUILD_STEP = declare(
    "environment.build-step", "error",
    "a build context's Dockerfile RUN step needs what neither its base image nor an earlier step provides")


@rule_for_each("environments", BUILD_STEP)
def environment_build_steps(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    """A build context's Dockerfile whose RUN step needs what neither its base image nor an earlier step provides
    (a compiler and MPI's and Python's headers to build mpi4py, torch before DeepSpeed) fails Azure ML's build:
    an error at the step's line (validate/build_steps.py; validators/base_images.yaml). A template's Dockerfile
    is judged where it is rendered (plan, render)."""
    if not (env.build and env.build.local_path):
        return   # a remote context's Dockerfile is not read here
    context = ctx.loaded.base_dir / env.build.path
    dockerfile = context / env.build.dockerfile_path
    text = project_text(dockerfile, project_root(ctx.loaded.path)) if inside(dockerfile, context) else None
    for p in build_step_problems(text) if text else ():
        yield Diagnostic("error", BUILD_STEP.id, p.message, str(dockerfile), p.line, 1, p.hint)


IMAGE_REFERENCE = declare("environment.image-reference", "error",
                          "an environment's `image:` is not an OCI image reference")


@rule_for_each("environments", IMAGE_REFERENCE)
def environment_image_reference(ctx: Context, name: str, env: Environment) -> Iterator[Diagnostic]:
    """`image:` held to the OCI reference grammar: Azure ML writes it after FROM in the Dockerfile it builds
    for an image with a conda file, so a newline in it would be a second instruction."""
    problem = image_reference_problem(env.image) if env.image is not None else None
    if problem:
        yield ctx.at(("environments", name, "image"), IMAGE_REFERENCE.id, problem,
                     f"write {REFERENCE_GRAMMAR}, e.g. mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest")
