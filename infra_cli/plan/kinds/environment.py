"""The environment kind (an Azure ML environment, or a curated one the stack only names): versions are
immutable, so changed content is a NEW version (a pinned version that exists with other content is an error);
a curated environment is resolved, never created; destroy releases the stack's versions (archived, its ownership
tags dropped: Azure ML never deletes one, jobs may name it); --replace registers the same content again as a new
version."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from infra_cli.azure.protocol import Provider
from infra_cli.conventions import TAG_ADDRESS, TAG_HASH, TAG_STACK
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.docker_templates import template_dir
from infra_cli.knowledge.update_semantics import environment_content_fields
from infra_cli.build_context import context_files
from infra_cli.plan.declaration import literal
from infra_cli.plan.kinds.base import REPLACE_REQUESTED, DiffContext, Kind, adopted, next_version
from infra_cli.plan.model import CREATE, NO_OP, UPDATE, Action, LiveState, Resource, ResourceChange, content_hash
from infra_cli.plan.normalise import split_tags
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.environment import Environment as DeclaredEnvironment, inline_conda_text
from infra_cli.stack.model import Stack
from infra_cli.stack.outputs import UNKNOWN
from infra_cli.stack.secret import Secret, contains_secret
from infra_cli.stack.source import MAX_STACK_BYTES, SourceMap, load_yaml

RELEASE_REASON = ("destroy requested: Azure ML never deletes environment versions (jobs may name them); they are "
                  "archived, as `az ml environment archive` does, and lose this stack's ownership tags")


# ---- desired: the stack's environment as the plan compares it (its content by hashes) -------------------------

_CHUNK = 1 << 20   # files are hashed in chunks of this many bytes: memory stays flat for a file of any size


def _hash_file(h, path: Path) -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    _hash_file(h, path)
    return h.hexdigest()


def _tree_sha256(root: Path) -> str:
    """A build context's content as it is uploaded (build_context.context_files: the ignore file honoured, no link
    followed out of it): relative paths and bytes of every file, in a stable order."""
    h = hashlib.sha256()
    for f in sorted(context_files(root).files, key=lambda f: Path(f.relative)):  # the order hashes always had
        h.update(f.relative.encode() + b"\0")
        _hash_file(h, f.source)
    return h.hexdigest()


def environment_attributes(loaded: LoadedStack, env: DeclaredEnvironment) -> dict:
    base = loaded.base_dir
    build = None
    if env.build is not None:
        if env.build.template:
            build = {"template": env.build.template, "parameters": env.build.parameters,
                     "template_sha256": _tree_sha256(template_dir(env.build.template))}
        else:   # a remote context (https://, azureml://) is never read here: its URI is its identity
            build = {"path": env.build.path, "dockerfile_path": env.build.dockerfile_path,
                     "context_sha256": hashlib.sha256(env.build.path.encode()).hexdigest() if env.build.remote
                     else _tree_sha256(base / env.build.path)}
    attributes = {
        "kind": env.kind,
        "curated": env.curated,
        "image": env.image,
        "conda_sha256": _file_sha256(base / env.conda_path) if env.conda_path else
        hashlib.sha256(env.inline_conda.encode()).hexdigest() if env.inline_conda else None,
        "build": build,
        "version": env.version,
        "requires": list(env.requires),
        "description": env.description,
        "tags": dict(sorted(env.tags.items())),
    }
    if env.inference_config is not None:   # only where given: every other environment keeps its attributes and hash
        attributes["inference_config"] = env.inference_config.model_dump()
    attributes["content_hash"] = environment_content_hash(attributes)
    if contains_secret(env.model_dump()):   # a hash of a secret's text (an image, a conda file from ${ENV}) is one
        for key in ("conda_sha256", "content_hash"):
            attributes[key] = Secret(attributes[key]) if attributes[key] is not None else None
    return attributes


# Content compared only where an environment has it, so an environment without it keeps the hash it always had.
_CONTENT_WHERE_GIVEN = ("inference_config",)


def environment_content_hash(attributes: dict) -> str:
    return content_hash({**{k: attributes.get(k) for k in environment_content_fields()},
                         **{k: attributes[k] for k in _CONTENT_WHERE_GIVEN if attributes.get(k) is not None}})


def desired_environments(loaded: LoadedStack) -> list[Resource]:
    out = []
    for name, env in loaded.stack.environments.items():
        attrs = environment_attributes(loaded, env)
        address = f"environment.{name}"
        tags = {TAG_STACK: loaded.stack.stack, TAG_ADDRESS: address, TAG_HASH: attrs["content_hash"]}
        out.append(Resource(address, "environment", name, attrs, tags))
    return out


# ---- live: a version as Azure answers it, its content known by the hash tag infra wrote on it -----------------

def environment_resource(name: str, version: str | None, tags: dict[str, str] | None,
                         next_version: str | None) -> Resource:
    """A live environment version. Its content is known by the hash tag the tool wrote on it."""
    user_tags, ours = split_tags(tags)
    attributes = {"version": version, "next_version": next_version, "content_hash": ours.get(TAG_HASH),
                  "tags": user_tags}
    return Resource(ours.get(TAG_ADDRESS) or f"environment.{name}", "environment", name, attributes, ours)


def live_environment(values: dict[str, Any]) -> Resource:
    resource = environment_resource(values["name"], values["version"], values["tags"], values["next_version"])
    if resource.attributes["content_hash"] is None and values.get("content"):
        # made outside infra (no hash tag): its content hashed as the stack's would be, for an import block
        resource.attributes["content_hash"] = recorded_content_hash(values["content"])
    return resource


def recorded_content_hash(content: dict[str, Any]) -> str | None:
    """The content hash (environment_attributes) of an environment version as Azure recorded it, when infra can
    know it: an image with an inline conda file (as `plan --generate-config-out` declares it). A build context lives
    in Azure's storage, not in the project: None (an adopted one gets a new version built from the stack's)."""
    if not content.get("image") or content.get("build"):
        return None
    conda = content.get("conda_file")
    parsed, _ = recorded_conda(conda) if conda else (None, None)
    text = inline_conda_text(parsed) if parsed is not None else None
    if conda and text is None:
        return None
    return environment_content_hash({"kind": "image", "image": content["image"], "build": None,
                                     "conda_sha256": hashlib.sha256(text.encode()).hexdigest() if text else None})


RECORDED_CONDA = "the conda file recorded in Azure"


def recorded_conda(conda: Any) -> tuple[dict | None, str | None]:
    """An environment version's conda file as Azure recorded it (YAML text), read as the stack loader reads a conda
    file a stack names (stack/source.py load_yaml: size, nesting, values and the text its aliases expand to bounded;
    `${` is text), so a few hundred bytes of nested YAML aliases read from Azure cannot keep plan or
    `--generate-config-out` expanding it for minutes. Returns (the mapping, None), or (None, why it was not read)."""
    if not isinstance(conda, str):
        return None, "it is not YAML text"
    if len(conda) > MAX_STACK_BYTES:
        return None, f"it is larger than {MAX_STACK_BYTES >> 20} MiB"
    try:
        parsed = load_yaml(conda, RECORDED_CONDA, interpolate=False)[0]
    except DiagnosticError as exc:
        first = exc.diagnostics[0]
        return None, "it is empty" if first.rule == "stack.empty" else first.message
    if not isinstance(parsed, dict):
        return None, "it is a list" if isinstance(parsed, list) else "it is a single value"
    return parsed, None


def read_environment(provider: Provider, name: str, pinned: str | None) -> Resource | None:
    values = provider.read("environment", name, pinned)
    return None if values is None else live_environment(values)


# ---- the diff -------------------------------------------------------------------------------------------------


def _environment_change(desired: Resource, live: Resource | None, source: SourceMap
                        ) -> tuple[ResourceChange | None, Diagnostic | None]:
    after = dict(desired.attributes)
    if after["kind"] == "curated":
        return ResourceChange(desired.address, "environment", desired.name, NO_OP, None, after, [],
                              "curated environment: resolved, never created"), None
    pinned = after.get("version")
    if live is None or live.attributes.get("version") is None:
        after["version"] = pinned or (live.attributes.get("next_version") if live else None) or "1"
        return ResourceChange(desired.address, "environment", desired.name, CREATE, None, after, [],
                              "new environment" if live is None else "new version"), None
    before = live.attributes
    if before.get("content_hash") == after["content_hash"]:
        after["version"] = before["version"]
        return ResourceChange(desired.address, "environment", desired.name, NO_OP, before, after), None
    if pinned and before.get("version") == pinned:
        return None, source.diagnostic(
            ("environments", desired.name, "version"), "plan.environment-version-immutable",
            f"environment {desired.name!r} version {pinned} already exists with different content; "
            "Azure ML environment versions are immutable",
            f"bump environments.{desired.name}.version (or remove it to let infra number versions)")
    after["version"] = pinned or before.get("next_version") or next_version(before.get("version"))
    return ResourceChange(desired.address, "environment", desired.name, CREATE, before, after, [],
                          f"new version {after['version']} (versions are immutable; version "
                          f"{before.get('version')} stays for jobs that use it)"), None


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


class Environment(Kind):
    name, section, az_noun, imported_noun = "environment", "environments", "environment", "environment"
    outputs_read_declaration = True
    graph_shape = "folder"
    resolves_curated = True

    def headline(self, change: ResourceChange, action: str) -> str | None:
        if action != "create":
            return None
        what = "will be created" if change.before is None else "will get a new version"
        return f"# {change.address} {what} (version {(change.after or {}).get('version')})"

    def declared(self, stack: Stack) -> dict[str, Any]:
        return stack.environments

    # infra's lock, serial and smoke records are environment versions (state/): read in the same batch
    keeps_state = True

    def desired(self, loaded: LoadedStack) -> list[Resource]:
        return desired_environments(loaded)

    def wanted(self, desired: list[Resource]) -> dict[str, str | None]:
        """Each declared environment infra makes, with the version it pins (a curated one is resolved instead)."""
        return {r.name: r.attributes.get("version") for r in desired
                if r.type == self.name and r.attributes.get("kind") != "curated"}

    def read_live(self, provider: Provider, wanted: dict[str, str | None]) -> dict[str, dict[str, Any] | None]:
        """One list of the workspace's environments, then the version of each wanted one that exists
        (provider.read_environments)."""
        return provider.read_environments(wanted)

    def normalise(self, values: dict[str, Any]) -> Resource:
        return live_environment(values)

    def exists(self, current: Resource | None) -> bool:
        return current is not None and bool(current.attributes.get("version"))

    def managed(self, desired: Resource) -> bool:
        return desired.attributes["kind"] != "curated"   # a curated one is named, never made

    def judge(self, res: Resource, current: Resource | None, adopt: bool, ctx: DiffContext
              ) -> tuple[list[ResourceChange], list[Diagnostic]]:
        change, problem = _environment_change(res, current, ctx.source)
        if change is not None and adopt:
            change = adopted(change, res.name)
        return [change] if change else [], [problem] if problem else []

    def diff_undeclared(self, desired: list[Resource], live: LiveState, ctx: DiffContext
                        ) -> tuple[list[ResourceChange], list[Diagnostic]]:
        """Destroy releases each environment whose live version this stack owns: an update of its versions
        (archived, infra's ownership tags dropped; nothing is deleted), so `state list` is empty after it and
        another stack may take the name. A curated reference is never the stack's (nothing was created). An
        environment the stack no longer declares stays as it is."""
        if ctx.mode != "destroy":
            return [], []
        out = []
        for res in desired:
            current = self.live(live).get(res.name) if res.type == self.name else None
            if current is None or current.attributes.get("version") is None or current.owner_stack != ctx.stack:
                continue
            out.append(ResourceChange(current.address, "environment", res.name, UPDATE, current.attributes,
                                      {**current.attributes, "archived": True}, [], RELEASE_REASON))
        return out, []

    def replace_requested(self, c: ResourceChange, source: SourceMap
                          ) -> tuple[list[ResourceChange], list[Diagnostic]] | None:
        """A new version of the same content; refused where the version is pinned (versions are immutable)."""
        if not (c.after and c.after.get("kind") != "curated" and c.actions == NO_OP):
            return None
        pinned = source.values.get(("environments", c.name, "version"))
        if pinned is not None:
            return [c], [source.diagnostic(
                ("environments", c.name, "version"), "plan.replace-pinned",
                f"--replace {c.address}: its version is pinned, and Azure ML environment versions are immutable",
                f"bump environments.{c.name}.version instead (or remove it to let infra number versions)")]
        before = c.before or {}   # a no-op's: the live version it has
        after = {**c.after, "version": before.get("next_version") or next_version(before.get("version"))}
        return [ResourceChange(c.address, c.type, c.name, CREATE, c.before, after, [],
                               f"new version {after['version']} ({REPLACE_REQUESTED})")], []


    def output(self, name: str, attribute: str, change: ResourceChange | None, live: LiveState, stack: Stack,
               resolved: dict[str, str | None]) -> Any:
        env = stack.environments.get(name)
        if env is None:
            return None
        if env.curated:
            asset = resolved.get(name) or env.curated   # a registry's: azureml://registries/...
            version = (asset.rsplit("/versions/", 1)[1] if "/versions/" in asset
                       else asset.rsplit(":", 1)[1] if asset.count(":") >= 2 and "@" not in asset else None)
        elif change is not None and change.action in (Action.CREATE, Action.REPLACE, Action.UPDATE):
            version = (change.after or {}).get("version") or UNKNOWN   # a new version: the one the plan assigns
            asset = f"azureml:{name}:{version}" if version is not UNKNOWN else UNKNOWN
        else:
            r = self.live(live).get(name)
            version = r.attributes.get("version") if r is not None else None
            if version is None:
                return None
            asset = f"azureml:{name}:{version}"
        return {"asset_id": asset, "name": name, "version": version, "image": env.image}.get(attribute)

    def read_imported(self, provider: Provider, wanted: list[tuple[int, str]], imports: list[Any]) -> dict[int, Any]:
        """One batch (provider.read_environments), by the names the import blocks' addresses give."""
        read = provider.read_environments({name: None for _, name in wanted})
        return {i: read.get(name) for i, name in wanted}

    def declaration(self, name: str, azure_name: str, read: Any, where: str
                    ) -> tuple[dict[str, Any], list[str]] | None:
        if read is None:
            return None
        body, notes = environment_declaration(read)
        notes.insert(0, f"environment.{name}: read from Azure ML environment {azure_name!r} version "
                        f"{read['version']} in {where}")
        return body, notes


ENVIRONMENT = Environment()
