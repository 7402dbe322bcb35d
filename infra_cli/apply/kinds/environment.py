"""How apply makes an environment's change: a new version registered (never one rewritten: versions are
immutable), with its build context staged where it has one; destroy archives the stack's versions and drops its
tags; an import block tags the version it adopts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from infra_cli.arguments import NextStep
from infra_cli.apply.kinds.base import Applying, KindSteps, Say, import_error, unowned
from infra_cli.azure.protocol import Provider
from infra_cli.conventions import TAG_HASH
from infra_cli.diagnostics import Diagnostic, DiagnosticError, LIST_ENVIRONMENTS, LIST_INSTEAD, says
from infra_cli.image.api import render_dockerfile
from infra_cli.build_context import stage_context
from infra_cli.plan.api import (CREATE, NO_OP, UPDATE, LiveState, Plan, Resource, ResourceChange, desired_resources,
                                read_environment)


def _build_files(env, base_dir) -> Callable:
    """A build context for `build:`: the rendered template, or a copy of what the user's directory uploads
    (build_context.context_files: its .amlignore honoured, no symlink followed out of it), so the SDK's own walk,
    which follows every link, never sees more."""
    def write(tmp: Path) -> Path:
        if env.build.template:
            (tmp / "Dockerfile").write_text(render_dockerfile(env.build.template, env.build.parameters))
            return tmp
        stage_context(Path(base_dir) / env.build.path, tmp / "context")
        return tmp / "context"

    return write


class EnvironmentSteps(KindSteps):
    def step(self, run: Applying, change: ResourceChange, desired: Resource | None, say: Say, *, first: bool) -> None:
        if change.actions == CREATE:
            assert desired is not None and change.after is not None   # a create is of the stack's declaration
            env = run.loaded.stack.environments[change.name]
            version = dict(desired.attributes, version=change.after["version"])
            resource = Resource(desired.address, desired.type, desired.name, version, desired.tags)
            say("progress", f"registering version {version['version']}")
            # registering the same content again is idempotent: a retry after an error is safe
            run.provider.write(resource.type, resource, base_dir=run.loaded.base_dir, conda_file=env.conda_file,
                               build_files=_build_files(env, run.loaded.base_dir) if env.build else None)
        elif change.actions == UPDATE:  # only destroy updates one: plan/kinds/environment.py diff_undeclared
            say("progress", "archiving its versions and dropping this stack's tags (Azure ML keeps versions)")
            run.provider.delete(change.type, change.name, stack=run.loaded.stack.stack)

    def adopt(self, run: Applying, change: ResourceChange, desired: Resource, say: Say) -> None:
        """Its version gets the tags (the content hash only when the content matches: else the stack's content is
        registered as a new version next)."""
        assert change.before is not None     # what is imported exists: its live version
        say("progress", f"importing {change.importing} version {change.before['version']}")
        tags = desired.tags if change.actions == NO_OP else {k: v for k, v in desired.tags.items() if k != TAG_HASH}
        run.provider.adopt_environment(change.name, change.before["version"], tags)

    def past(self, change: ResourceChange) -> str:
        if change.actions == UPDATE:
            return "released (versions archived, this stack's tags dropped)"
        return f"registered version {(change.after or {}).get('version')}"


    def destroy_refusal(self, change: ResourceChange, plan: Plan, live: LiveState, verb: str, file: str, hint: str
                        ) -> Diagnostic | None:
        return Diagnostic("error", "apply.not-destroyable", f"{change.address}: the plan would {verb} "
                          f"a {change.type}; infra never deletes one", file, None, None, hint)

    def importable(self, loaded: Any, address: str, name: str, provider: Provider) -> Any:
        """The environment's latest live version, or the reason it cannot be imported."""
        if loaded.stack.environments[name].curated:
            raise import_error(loaded, f"{address} is a curated environment: infra only reads it, there is nothing "
                               "to import", "import an environment the stack registers (image: or build:)")
        live = read_environment(provider, name, None)
        if live is None or live.attributes.get("version") is None:
            raise import_error(loaded, f"there is no environment {name!r} in workspace {loaded.stack.workspace.name!r}",
                               says("check the name with ", NextStep(LIST_ENVIRONMENTS, local_instead=LIST_INSTEAD)))
        return unowned(loaded, address, live, f"environment {name!r} (version {live.attributes['version']})")

    def adopt_imported(self, loaded: Any, address: str, name: str, provider: Provider, live: Any) -> str:
        """Its latest version gets this stack's ownership tags, and the content hash when its content is the
        stack's (else the next apply registers the stack's content as a new version)."""
        desired = next(r for r in desired_resources(loaded) if r.address == address)
        same = live.attributes.get("content_hash") == desired.attributes["content_hash"]
        tags = desired.tags if same else {k: v for k, v in desired.tags.items() if k != TAG_HASH}
        version = live.attributes["version"]
        provider.adopt_environment(name, version, tags)
        return (f"Imported {name} version {version} as {address}." + ("" if same else
                " Its content is not the stack's (or infra cannot compare it): the next apply registers the stack's "
                "as a new version."))

    def forget(self, loaded: Any, address: str, name: str, provider: Provider, bump_serial: Callable[[], Any],
               error: Callable[[str, str], DiagnosticError]) -> str:
        stack, file = loaded.stack.stack, loaded.file
        env = read_environment(provider, name, None)
        if env is None or env.owner_stack != stack:
            raise error(f"stack {stack!r} owns no {address}", says(NextStep(("infra", "state", "list"), (file,)),
                                                                   " lists what it owns"))
        bump_serial()
        versions = provider.forget_environment(name, stack)
        return (f"Removed {address} from stack {stack!r}: environment {name} (version {', '.join(versions)}) is left "
                "as it is, no longer managed.")


ENVIRONMENT_STEPS = EnvironmentSteps()
