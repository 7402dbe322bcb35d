"""`infra render`: a valid stack -> the files `az ml compute create -f` / `az ml environment create -f` take.

Layout under the output directory:
    clusters/NAME.yml                       amlCompute YAML
    environments/NAME.yml                   environment YAML (image or build)
    environments/NAME/                      its assets: the copied conda file, the build context
    environments/NAME.curated.txt           curated environments are referenced, not created
    jobs/...  code/...                      smoke and training jobs, a training job's code (smoke/job_templates.py)
    .infra-render.json                      the manifest: per stack, every file render wrote, with its sha256 and
                                            an HMAC of both under the user's render key

What render writes never harms what it reads: an output directory that is, holds or lies inside a file or
folder the stack reads (the stack, its conda files, build contexts, code, infra's templates) is refused before
anything is written; every file is written beneath the output directory through no symbolic link
(safe_files.write_beneath: a link at a file's place is replaced, never written through, and a link on the way is
refused before anything is written); and a re-render removes the files of its stack's previous manifest entries
the stack no longer has, only while each is still exactly what render wrote.

Render owns its files per stack: several stacks render into one --out, each removing only its own files, and
a file another stack's render wrote (and still holds) is refused, not overwritten. A manifest entry counts only
with a valid HMAC under a key of this user's (INFRA_PLAN_KEY when set, else a random key made 0600 in
paths.user_state_dir()): a forged entry, even with the right sha256 of a file, removes nothing.

Secrets: ssh_settings.admin_password and ssh_settings.ssh_key_value are never written (the file says how to
pass them with `--set`), nor one environment variable from ${VAR} (the job file holds its reference). Any other
sensitive value a file would hold (a sensitive map given whole, a ${VAR} in a command, a SAS URL) is refused at
its value, unless `write_secrets`: then the file holding it is mode 0600 and every run warns of it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
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
from infra_cli.build_context import context_files
from infra_cli.paths import local_project, project_root, templates_dir, user_state_dir
from infra_cli.private_state import private_key_file
from infra_cli.safe_files import OutputFile, link_on_the_way, read_beneath, remove_beneath, write_beneath
from infra_cli.smoke.api import distribution_job_files
from infra_cli.stack.cluster_fields import RENDER, ClusterField, path_value, rows
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.variables import Inputs
from infra_cli.stack.cluster import Cluster
from infra_cli.stack.environment import AML_ENVIRONMENT_SCHEMA, Environment
from infra_cli.stack.secret import revealed
from infra_cli.validate.engine import load_valid_stack

MANIFEST = ".infra-render.json"
MANIFEST_FORMAT = 2   # 1 (unsigned, one stack) is read as entries nobody can vouch for: it removes nothing
RENDER_KEY_FILE = "render.key"
_HMAC = "hmac-sha256:"
MANIFEST_LIMIT = 16 << 20   # a manifest larger than this was not written by render: it is not read
_SHA256 = re.compile(r"[0-9a-f]{64}")
COMPUTE_SCHEMA = "https://azuremlschemas.azureedge.net/latest/amlCompute.schema.json"
SECRET_SSH_FIELDS = ("admin_password", "ssh_key_value")


def _stack_path(field: ClusterField) -> str:
    """A rendered field's stack path: render writes each under its stack path (stack/cluster_fields.py)."""
    assert field.stack is not None
    return field.stack


def compute_document(name: str, cluster: Cluster) -> dict[str, Any]:
    """The Azure ML CLI v2 amlCompute document of a cluster, without secrets or our own additions: the fields
    stack/cluster_fields.py renders, in its order, each under its stack path."""
    doc: dict[str, Any] = {"$schema": COMPUTE_SCHEMA, "name": name, "type": "amlcompute"}
    for field in rows(RENDER):
        if field.render == "section":  # e.g. network_settings, identity: the section as written
            section = _stack_path(field).split(".")[0]
            value = getattr(cluster, section)
            if value is not None and section not in doc:
                doc[section] = value.model_dump(exclude_none=True)
            continue
        value = path_value(cluster, _stack_path(field))
        if field.render == "always" or (value if field.render == "if_set" else value is not None):
            *parents, leaf = _stack_path(field).split(".")
            target = doc
            for parent in parents:
                target = target.setdefault(parent, {})
            target[leaf] = dict(value) if isinstance(value, dict) else value
    return doc


def _holding(loaded: LoadedStack, base: tuple, *fields: tuple) -> tuple[tuple, ...]:
    """The stack paths below `base` (a resource) of the sensitive values (from a sensitive variable or ${VAR}) that a
    file writing `fields` of it holds in clear: a path at, inside or around one of them (a map given whole)."""
    n = len(base)
    return tuple(sorted((tuple(p) for p in loaded.source.interpolated
                         if tuple(p[:n]) == base and len(p) > n
                         and any(tuple(p[n:n + len(f)]) == f or f[:len(p) - n] == tuple(p[n:]) for f in fields)),
                        key=repr))


# What of a cluster its file writes: the fields stack/cluster_fields.py renders (a section whole)
_CLUSTER_FILE_FIELDS = tuple(dict.fromkeys(
    tuple(_stack_path(f).split(".")[:1] if f.render == "section" else _stack_path(f).split(".")) for f in rows(RENDER)))


def _cluster_file(loaded: LoadedStack, name: str, cluster: Cluster) -> OutputFile:
    secrets = _holding(loaded, ("clusters", name), *_CLUSTER_FILE_FIELDS)
    doc = compute_document(name, cluster)
    return OutputFile(f"clusters/{name}.yml", f"# az ml compute create -f clusters/{name}.yml\n"
                      + _secret_note(name, cluster) + _yaml(revealed(doc) if secrets else doc), secrets=secrets)


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
    if env.inference_config is not None:
        doc["inference_config"] = env.inference_config.model_dump()
    return doc


def _environment_files(loaded: LoadedStack, name: str, env: Environment) -> list[OutputFile]:
    at = ("environments", name)
    if env.curated:
        return [OutputFile(f"environments/{name}.curated.txt",
                           f"Environment {name!r} is the curated Azure ML environment {env.curated}.\n"
                           "Curated environments are referenced by jobs, not created: nothing to `az ml environment "
                           f"create`.\nWhat it names now: {_show_command(env.curated)}\n",
                           secrets=_holding(loaded, at, ("curated",)))]
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
            files.append(OutputFile(f"environments/{conda}", env.inline_conda,   # in clear (model.inline_conda_text)
                                    secrets=_holding(loaded, at, ("conda_file",))))
            doc["conda_file"] = conda
    elif env.build.remote:   # Azure ML fetches it: its URI, passed through
        doc["build"] = {"path": env.build.path, "dockerfile_path": env.build.dockerfile_path}
    elif env.build.path:
        # the context as it is uploaded (build_context.context_files): no symlink followed out of it, ignored files left
        # out; modes no wider than the source's
        files += [OutputFile(f"environments/{name}/context/{f.relative}", source=f.source)
                  for f in context_files(loaded.base_dir / env.build.path).files]
        doc["build"] = {"path": f"{name}/context", "dockerfile_path": env.build.dockerfile_path}
    else:
        secrets = _holding(loaded, at, ("build", "template"), ("build", "parameters"))
        parameters = dict(env.build.parameters)
        files.append(OutputFile(f"environments/{name}/context/Dockerfile", render_dockerfile(
            env.build.template, revealed(parameters) if secrets else parameters), secrets=secrets))
        doc["build"] = {"path": f"{name}/context", "dockerfile_path": "Dockerfile"}
    header = f"# az ml environment create -f environments/{name}.yml\n"
    secrets = _holding(loaded, at, ("description",), ("tags",), ("version",), ("image",), ("os_type",),
                       ("build", "dockerfile_path"), ("build", "path"), ("inference_config",))
    files.append(OutputFile(f"environments/{name}.yml", header + _yaml(revealed(doc) if secrets else doc),
                            secrets=secrets))
    return files


def _yaml(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _show_command(reference: str) -> str:
    """The az ml command that shows what an environment reference resolves to (a label to its version)."""
    ref = parse_environment_reference(reference)
    q = shlex.quote  # a command to paste: each value one shell word
    where = f"--registry-name {q(ref.registry)}" if ref.registry else "--resource-group RG --workspace-name WS"
    if ref.version:
        which = f"--version {q(ref.version)}"
    else:
        assert ref.label is not None     # a reference names a version or a label
        which = f"--label {q(ref.label)}"
    return f"az ml environment show --name {q(ref.name)} {which} {where}"


def _outputs(loaded: LoadedStack) -> list[OutputFile]:
    """Every file of the stack's render, in order (nothing written yet: a template that refuses a value stops
    the render before the output directory is touched). A file that holds a secret (its `secrets`) is its text in
    clear (stack/secret.py `revealed`): render refuses it, or writes it 0600 under --write-secrets; every other
    file writes a sensitive value redacted."""
    files = [_cluster_file(loaded, name, cluster) for name, cluster in loaded.stack.clusters.items()]
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
        if env.build and env.build.local_path:
            yield ("environments", name, "build", "path"), "the build context", base / env.build.local_path
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
                                          loaded.file if what == "the stack file" else None, None, None, hint))
        else:
            diagnostics.append(loaded.source.diagnostic(where, "render.out-overlaps-input", message, hint))
    raise DiagnosticError(diagnostics)


# ---- the manifest: per stack, what render wrote, so a re-render removes exactly that ------------------------

Entries = dict[str, dict[str, str]]   # stack -> {relative path: sha256}, only entries signed under a key of ours


def render_keys(plan_key: bytes | None, warnings: list[Diagnostic]) -> list[bytes]:
    """The keys a manifest entry may be signed under, the signing one first: INFRA_PLAN_KEY's when set (derived for
    render, so an entry's HMAC is never a plan file's), and this user's render key (made 0600 on first use, in
    paths.user_state_dir()). Without either, render signs nothing, so no later render removes what it writes."""
    keys = []
    if plan_key is not None:
        keys.append(hmac.new(plan_key, b"infra render manifest", hashlib.sha256).digest())
    path = user_state_dir() / RENDER_KEY_FILE
    try:
        keys.append(private_key_file(path))
    except (DiagnosticError, OSError) as exc:
        why = exc.diagnostics[0].message if isinstance(exc, DiagnosticError) else f"{path}: {exc.strerror or exc}"
        hint = exc.diagnostics[0].hint if isinstance(exc, DiagnosticError) else None
        if not keys:
            warnings.append(Diagnostic("warning", "render.key-unavailable", f"no render key ({why}): the files "
                                       "written now are listed unsigned, so no later render removes them", None,
                                       None, None, hint or "set XDG_STATE_HOME to a folder of your own"))
    return keys


def _entry_hmac(key: bytes, stack: str, relative: str, sha256: str) -> str:
    message = json.dumps(["infra render", stack, relative, sha256]).encode()
    return _HMAC + hmac.new(key, message, hashlib.sha256).hexdigest()


def _signed(entry: object, keys: list[bytes], stack: str, relative: str) -> str | None:
    """The sha256 of a manifest entry signed under one of `keys` for (stack, relative), else None."""
    if not isinstance(entry, dict) or not _clean_relative(relative):
        return None
    sha, mac = entry.get("sha256"), entry.get("hmac")
    if not (isinstance(sha, str) and _SHA256.fullmatch(sha) and isinstance(mac, str)):
        return None
    return sha if any(hmac.compare_digest(mac, _entry_hmac(k, stack, relative, sha)) for k in keys) else None


def _previous_manifest(out: Path, keys: list[bytes], warnings: list[Diagnostic]) -> Entries:
    """Per stack, relative path -> sha256 of each file an earlier render wrote ({} when there was none), only
    the entries signed under one of `keys`. A manifest that is not one render wrote (a link, unreadable,
    malformed) and entries nobody of ours signed remove nothing, with a warning."""
    if not os.path.lexists(out / MANIFEST):
        return {}
    data = read_beneath(out, MANIFEST, MANIFEST_LIMIT)
    try:
        doc = json.loads(data) if data is not None and len(data) < MANIFEST_LIMIT else None
        if isinstance(doc, dict) and doc.get("format_version") == 1 and isinstance(doc.get("files"), dict):
            stacks = {"": {"files": doc["files"]}}   # an older infra's: unsigned, vouched for by nobody
        elif isinstance(doc, dict) and doc.get("format_version") == MANIFEST_FORMAT and isinstance(doc.get("stacks"), dict):
            stacks = doc["stacks"]
        else:
            raise ValueError
    except (ValueError, TypeError, UnicodeDecodeError):
        warnings.append(Diagnostic("warning", "render.manifest-unreadable",
                                   f"{out / MANIFEST} is not a manifest infra render wrote: no file of an earlier "
                                   "render was removed", str(out / MANIFEST), None, None,
                                   "delete it (render writes a new one) and remove stale files by hand"))
        return {}
    entries: Entries = {}
    unsigned = 0
    for stack, body in stacks.items():
        files = body.get("files") if isinstance(body, dict) else None
        for relative, entry in (files.items() if isinstance(files, dict) else ()):
            sha = _signed(entry, keys, stack, relative) if stack else None
            if sha is None:
                unsigned += 1
            else:
                entries.setdefault(stack, {})[relative] = sha
    if unsigned:
        warnings.append(Diagnostic(
            "warning", "render.manifest-unsigned", f"{unsigned} entr{'y' if unsigned == 1 else 'ies'} of {out / MANIFEST} "
            "carry no valid signature of this user's render key (an entry render did not write, or one written by "
            "another user, under another key or by an older infra): their files were left alone and the entries "
            "dropped", str(out / MANIFEST), None, None, "remove by hand what an earlier render left that you no "
            "longer need"))
    return entries


def _clean_relative(relative: str) -> bool:
    parts = relative.split("/")
    return relative != MANIFEST and all(p not in ("", ".", "..") for p in parts) and "\0" not in relative


def _manifest_text(entries: Entries, key: bytes | None) -> str:
    """The manifest of `entries`, each signed under `key` (unsigned without one: then no render trusts it)."""
    stacks = {stack: {"files": {relative: {"sha256": sha, **({"hmac": _entry_hmac(key, stack, relative, sha)}
                                                             if key is not None else {})}
                                for relative, sha in files.items()}}
              for stack, files in entries.items() if files}
    return json.dumps({"format_version": MANIFEST_FORMAT, "generator": "infra render", "stacks": stacks},
                      indent=1, sort_keys=True) + "\n"


def _refuse_other_stacks_files(loaded: LoadedStack, out: Path, out_given: Path, outputs: list[OutputFile],
                               others: Entries) -> None:
    """Render writes over no file another stack's render wrote and still has there (a file its owner's render
    would keep or remove as its own); a file since deleted is free."""
    owner = {relative: stack for stack, files in others.items() for relative in files}
    taken: dict[str, list[str]] = {}
    for f in outputs:
        if f.relative in owner and os.path.lexists(out / f.relative):
            taken.setdefault(owner[f.relative], []).append(f.relative)
    if taken:
        raise DiagnosticError([Diagnostic(
            "error", "render.file-of-another-stack",
            f"{out_given / files[0]}{f' and {len(files) - 1} more file(s) this render writes' if len(files) > 1 else ''} "
            f"{'were' if len(files) > 1 else 'was'} written by a render of stack {stack!r}, which still owns "
            f"{'them' if len(files) > 1 else 'it'}: a render of stack {loaded.stack.stack!r} writes over no other "
            "stack's file; nothing was written", loaded.source.file, None, None,
            f"render each stack into its own folder (e.g. --out {_suggested_out(loaded)}), or first delete from "
            f"{out_given} the files stack {stack!r} rendered there") for stack, files in sorted(taken.items())])


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


# ---- secrets: refused where the stack gives them, or written 0600 when told -----------------------------------

_KEY_VAULT_WAY = ("read it in the job at run time from a Key Vault secret (the workspace's Key Vault, through the "
                  "job's identity: https://learn.microsoft.com/azure/machine-learning/how-to-use-secrets-in-runs)")
_FLAG_WAY = "pass --write-secrets to write it in clear (those files mode 0600, with a warning on every run)"


def _secret_what(loaded: LoadedStack, path: tuple) -> tuple[str, str]:
    """What the secret at `path` is (never its value), and the better way than writing it."""
    if path not in loaded.source.interpolated:
        return ("a SAS URL (its `sig=` signature is a credential to the data)",
                "name the data by a datastore URI (azureml://datastores/NAME/paths/...), whose credentials Azure ML "
                f"keeps, or {_KEY_VAULT_WAY}")
    found = list(dict.fromkeys(re.findall(r"\$\{[^{}]*\}", loaded.source.written.get(path, ""))))
    origin = f" (from {', '.join(found)})" if found else ""
    # every ${NAME} of the environment is sensitive: a value that is no secret is a variable that is not
    plain = ("; if it is no secret, pass it as a variable that is not sensitive (${var.NAME}, set with --var or "
             "INFRA_VAR_NAME) instead of ${NAME}") if any(not r.startswith("${var.") for r in found) else ""
    if path[-1] == "environment_variables":
        return (f"a sensitive map given whole{origin}", "give each variable its own ${VAR} under "
                "environment_variables (the job file then holds the reference and says how to --set it), or "
                f"{_KEY_VAULT_WAY}{plain}")
    return f"a sensitive value{origin}", _KEY_VAULT_WAY + plain


def _secrets(loaded: LoadedStack, outputs: list[OutputFile], out_given: Path, write: bool) -> list[Diagnostic]:
    """An error at each secret a file would hold in clear, or with `write` a warning naming the files (0600)."""
    held: dict[tuple, list[str]] = {}
    for f in outputs:
        for path in f.secrets:
            held.setdefault(tuple(path), []).append(f.relative)
    found = []
    for path, files in sorted(held.items(), key=lambda item: (loaded.source.position(item[0]), repr(item[0]))):
        what, better = _secret_what(loaded, path)
        where = ".".join(map(str, path))
        shown = ", ".join(str(out_given / r) for r in files)
        if write:
            found.append(loaded.source.diagnostic(
                path, "render.secret-written", f"{where} is {what}: written in clear into {shown} (--write-secrets, "
                "mode 0600)", f"keep these files out of version control and of uploaded code; better: {better}",
                severity="warning"))
        else:
            found.append(loaded.source.diagnostic(
                path, "render.secret", f"{where} is {what}: render would write it in clear into {shown} (and a job "
                "uploads its folder); nothing was written", f"{better}; or {_FLAG_WAY}"))
    return found


def _write_error(exc: OSError, out_given: Path) -> DiagnosticError:
    return DiagnosticError([Diagnostic("error", "render.write", f"cannot write {exc.filename or out_given}: "
                                       f"{exc.strerror or exc}", str(out_given), None, None,
                                       "pass an --out directory you can write to")])


def render_stack(stack_path: str | Path, out_dir: str | Path, *, write_secrets: bool = False,
                 plan_key: bytes | None = None, inputs: Inputs | None = None) -> tuple[list[Path], list[Diagnostic]]:
    """Validate the stack and write its Azure ML CLI v2 files; returns (written paths, warnings and notes).

    Raises DiagnosticError, with nothing written, when the stack has errors, when the output directory is, holds
    or lies inside something the stack reads, when a symbolic link or a non-directory is on the way to a file,
    when a file would hold a secret in clear (unless `write_secrets`: then it is written 0600, with a warning), or
    when a file is another stack's render's. `plan_key`: INFRA_PLAN_KEY, which signs the manifest when given.
    """
    loaded, warnings = load_valid_stack(Path(stack_path), inputs=inputs)
    unbuildable = template_build_diagnostics(loaded)   # a Dockerfile Azure ML could not build is not written
    if unbuildable:
        raise DiagnosticError(warnings + unbuildable)
    out_given = Path(out_dir)
    out = out_given.resolve()   # the directory the user named (a link to it is theirs); below it no link is followed
    _refuse_overlap(loaded, out_given, out)
    if os.path.lexists(out) and not out.is_dir():
        raise _write_error(NotADirectoryError(errno.ENOTDIR, "not a directory", str(out_given)), out_given)
    outputs = _outputs(loaded)
    secrets = _secrets(loaded, outputs, out_given, write_secrets)
    if secrets and not write_secrets:
        raise DiagnosticError(warnings + secrets)
    in_the_way = [why for f in [*outputs, OutputFile(MANIFEST)] if (why := link_on_the_way(out, f.relative))]
    if in_the_way:
        raise DiagnosticError([Diagnostic(
            "error", "render.output-link", f"{why}: render writes no file through a link or over a folder in its "
            "output directory; nothing was written", str(out_given), None, None,
            "remove it, or render into a fresh --out directory") for why in dict.fromkeys(in_the_way)])
    diagnostics = list(warnings) + secrets
    keys = render_keys(plan_key, diagnostics)
    key = keys[0] if keys else None
    stack = loaded.stack.stack
    written: dict[str, str] = {}
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise _write_error(exc, out_given) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)   # renders into one folder take turns: each reads the manifest another wrote
        entries = _previous_manifest(out, keys, diagnostics)
        previous = entries.pop(stack, {})
        _refuse_other_stacks_files(loaded, out, out_given, outputs, entries)
        mine = {f.relative for f in outputs}   # a file another stack left and deleted since is this one's now
        others = {s: {r: sha for r, sha in files.items() if r not in mine} for s, files in entries.items()}
        try:
            for f in outputs:
                written[f.relative] = write_beneath(out, f)
        except BaseException:
            # what render wrote so far stays listed with the earlier render's, so the next render removes it
            write_beneath(out, OutputFile(MANIFEST, _manifest_text({**others, stack: {**previous, **written}}, key)))
            raise
        diagnostics += _remove_stale(out, out_given, previous, written)
        write_beneath(out, OutputFile(MANIFEST, _manifest_text({**others, stack: written}, key)))
    except OSError as exc:
        raise _write_error(exc, out_given) from None
    finally:
        os.close(lock)
    return [out_given / relative for relative in written], diagnostics
