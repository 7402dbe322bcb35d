"""`infra plan STACK --generate-config-out FILE` (Terraform's -generate-config-out): for each import block whose
target the stack does not declare, its declaration read live from Azure, in the stack's own YAML, for the user to
merge into the stack. Secrets are never read back (Azure never returns them): they are `${VAR}` placeholders."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from infra_cli.azure.protocol import Provider
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.plan.live import read_cluster, recorded_conda
from infra_cli.plan.normalise import is_other_compute, split_tags
from infra_cli.stack.cluster_fields import CLUSTER_FIELDS
from infra_cli.stack.load import LoadedStack

# the plan attributes that are not the stack's to write: infra's own, secrets, and live state
_NOT_DECLARED = {"ssh_credentials_hash", "prevent_destroy", "user_assigned_identities", "tags",
                 "provisioning_state", "provisioning_error", "provisioning_since"}


def undeclared_imports(loaded: LoadedStack) -> list[tuple[int, str, str]]:
    """(index, kind, Azure name) of each import block whose target the stack does not declare."""
    stack, out = loaded.stack, []
    for i, block in enumerate(stack.imports):
        kind, _, name = block.to.partition(".")
        if name not in (stack.clusters if kind == "cluster" else stack.environments):
            out.append((i, kind, name))
    return out


def refuse_existing(path: Path) -> None:
    """As Terraform: the generated file must not exist (it is never overwritten nor appended to)."""
    if os.path.lexists(path):
        raise DiagnosticError([Diagnostic("error", "generate-config.exists", f"{path} already exists", str(path),
                                          None, None, "name a new file: infra never overwrites one it generates")])


def literal(value: Any) -> Any:
    """A value read from Azure, written so the stack reads it back as it is: `$` doubled (the loader's escape), so a
    tag value `${GITHUB_TOKEN}` stays text and never pulls an environment variable's value into Azure."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def _placeholder(name: str, what: str) -> str:
    return "${" + re.sub(r"[^A-Za-z0-9]", "_", f"{name}_{what}").upper() + "}"


def cluster_declaration(attributes: dict[str, Any], name: str) -> dict[str, Any]:
    """A live cluster's plan attributes -> its stack entry (the fields the stack writes, Azure's defaults left out
    only where the stack's default is the same)."""
    out: dict[str, Any] = {}
    for f in CLUSTER_FIELDS:
        value = attributes.get(f.attribute)
        if f.stack is None or f.attribute in _NOT_DECLARED or value is None:
            continue
        if f.attribute == "ssh_public_access_enabled" and not attributes.get("ssh_admin_username"):
            continue
        holder, *rest = f.stack.split(".")
        if rest:
            out.setdefault(holder, {})[rest[0]] = value
        else:
            out[holder] = value
    if attributes.get("user_assigned_identities"):
        out.setdefault("identity", {})["user_assigned_identities"] = [
            {"resource_id": i} for i in attributes["user_assigned_identities"]]
    if attributes.get("tags"):
        out["tags"] = dict(attributes["tags"])
    out = literal(out)
    if "ssh_settings" in out:   # Azure never returns the secret: the user supplies it from the environment
        out["ssh_settings"]["admin_password"] = _placeholder(name, "admin_password")
    return out


def environment_declaration(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A live environment version -> its stack entry, and what the header says of it."""
    content, notes = values.get("content") or {}, []
    out: dict[str, Any] = {}
    if content.get("image"):
        out["image"] = content["image"]
    if content.get("build"):
        build = content["build"]
        out["build"] = {"path": f"{values['name']}-context", "dockerfile_path": build.get("dockerfile_path")
                        or "Dockerfile"}
        notes.append(f"its build context is recorded at {build.get('context_uri')}: put a copy in "
                     f"{values['name']}-context/ beside the stack (its next apply registers a new version)")
    conda = content.get("conda_file")
    if conda:
        parsed, why = recorded_conda(conda)   # under the loader's bounds, as plan reads it
        if parsed is not None:
            out["conda_file"] = parsed   # inline, as Azure recorded it
        else:
            notes.append(f"its conda file as recorded is not a YAML mapping infra reads ({why}): left out (add "
                         "conda_file: yourself)")
    if content.get("description"):
        out["description"] = content["description"]
    user_tags, _ = split_tags(values.get("tags"))
    if user_tags:
        out["tags"] = user_tags
    return literal(out), notes


def one_line(text: str) -> str:
    """A comment's text: a line break or other control character read from Azure (or a file name) never ends the
    comment and starts YAML of its own."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", "?", text)


def _entry(section: str, name: str, body: dict[str, Any], notes: list[str]) -> str:
    text = yaml.safe_dump({name: body}, sort_keys=False, default_flow_style=False, allow_unicode=True)
    comments = "".join(f"  # {one_line(n)}\n" for n in notes)
    return comments + "".join(f"  {line}\n" for line in text.splitlines())


def generate_config(loaded: LoadedStack, provider: Provider) -> tuple[str, list[str]]:
    """The YAML text for the undeclared import targets, and their addresses. An id Azure does not have is an
    error at its import block."""
    ws = loaded.stack.workspace
    where = f"workspace {ws.name!r} (resource group {ws.resource_group!r}, subscription {ws.subscription_id})"
    sections: dict[str, list[str]] = {"clusters": [], "environments": []}
    addresses, problems = [], []
    wanted = undeclared_imports(loaded)
    envs = provider.read_environments({name: None for _, kind, name in wanted if kind == "environment"})
    for i, kind, name in wanted:
        block = loaded.stack.imports[i]
        if kind == "cluster":
            live = read_cluster(provider, block.id)
            if live is None or is_other_compute(live):
                problems.append(loaded.source.diagnostic(
                    ("import", i, "id"), "import.not-found", f"import of {block.to}: {where} has no AmlCompute "
                    f"cluster {block.id!r}", "check the name with `az ml compute list`"))
                continue
            notes = [f"cluster.{name}: read from Azure ML compute {block.id!r} (AmlCompute) in {where}"]
            if live.owner_stack:
                notes.append(f"it carries stack {live.owner_stack!r}'s ownership tags")
            body = cluster_declaration(live.attributes, name)
            if "ssh_settings" in body:
                notes.append(f"set {body['ssh_settings']['admin_password'][2:-1]} to its admin password (or "
                             "replace admin_password with ssh_key_value: ${VAR}); Azure never returns either")
            sections["clusters"].append(_entry("clusters", name, body, notes))
        else:
            values = envs.get(name)
            if values is None:
                problems.append(loaded.source.diagnostic(
                    ("import", i, "id"), "import.not-found", f"import of {block.to}: {where} has no environment "
                    f"{block.id!r}", "check the name with `az ml environment list`"))
                continue
            body, notes = environment_declaration(values)
            notes.insert(0, f"environment.{name}: read from Azure ML environment {block.id!r} version "
                            f"{values['version']} in {where}")
            sections["environments"].append(_entry("environments", name, body, notes))
        addresses.append(block.to)
    if problems:
        raise DiagnosticError(problems)
    header = (f"# Generated by `infra plan {one_line(loaded.path.name)} --generate-config-out` from live Azure state: the\n"
              "# declarations of the import blocks' targets. Merge them into the stack's clusters: and environments:,\n"
              "# then `infra plan` shows what importing them does.\n")
    body = "".join(f"{section}:\n" + "".join(entries) for section, entries in sections.items() if entries)
    return header + body, addresses


def write_generated(path: Path, text: str) -> None:
    """Created, never overwritten (O_EXCL), no link followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
