"""The environment kind (an Azure ML environment, or a curated one the stack only names): versions are
immutable, so changed content is a NEW version (a pinned version that exists with other content is an error);
a curated environment is resolved, never created; destroy releases the stack's versions (archived, its ownership
tags dropped: Azure ML never deletes one, jobs may name it); --replace registers the same content again as a new
version."""

from __future__ import annotations

from typing import Any

from infra_cli.azure.protocol import Provider
from infra_cli.diagnostics import Diagnostic
from infra_cli.plan.declaration import literal
from infra_cli.plan.kinds.base import REPLACE_REQUESTED, DiffContext, Kind, adopted, next_version
from infra_cli.plan.live import LiveState, recorded_conda
from infra_cli.plan.model import CREATE, NO_OP, UPDATE, Action, Resource, ResourceChange
from infra_cli.plan.normalise import split_tags
from infra_cli.stack.model import Stack
from infra_cli.stack.outputs import UNKNOWN
from infra_cli.stack.source import SourceMap

RELEASE_REASON = ("destroy requested: Azure ML never deletes environment versions (jobs may name them); they are "
                  "archived, as `az ml environment archive` does, and lose this stack's ownership tags")


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
    graph_shape = "folder"

    def headline(self, change: ResourceChange, action: str) -> str | None:
        if action != "create":
            return None
        what = "will be created" if change.before is None else "will get a new version"
        return f"# {change.address} {what} (version {(change.after or {}).get('version')})"

    def declared(self, stack: Stack) -> dict[str, Any]:
        return stack.environments

    def live(self, live: LiveState) -> dict[str, Resource]:
        return live.environments

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
            current = live.environments.get(res.name) if res.type == self.name else None
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
        after = {**c.after, "version": c.before.get("next_version") or next_version(c.before.get("version"))}
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
            r = live.environments.get(name)
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
