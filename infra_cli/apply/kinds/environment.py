"""How apply makes an environment's change: a new version registered (never one rewritten: versions are
immutable), with its build context staged where it has one; destroy archives the stack's versions and drops its
tags; an import block tags the version it adopts."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from infra_cli.apply.kinds.base import Applying, KindSteps, Say
from infra_cli.conventions import TAG_HASH
from infra_cli.image.api import render_dockerfile
from infra_cli.paths import stage_context
from infra_cli.plan.api import CREATE, NO_OP, UPDATE, Resource, ResourceChange


def _build_files(env, base_dir) -> Callable:
    """A build context for `build:`: the rendered template, or a copy of what the user's directory uploads
    (paths.context_files: its .amlignore honoured, no symlink followed out of it), so the SDK's own walk,
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
            assert desired is not None   # a create is of the stack's declaration
            env = run.loaded.stack.environments[change.name]
            version = dict(desired.attributes, version=change.after["version"])
            resource = Resource(desired.address, desired.type, desired.name, version, desired.tags)
            say("progress", f"registering version {version['version']}")
            # registering the same content again is idempotent: a retry after an error is safe
            run.provider.create_environment_version(
                resource, run.loaded.base_dir, env.conda_file,
                _build_files(env, run.loaded.base_dir) if env.build else None)
        elif change.actions == UPDATE:  # only destroy updates one: plan/kinds/environment.py diff_undeclared
            say("progress", "archiving its versions and dropping this stack's tags (Azure ML keeps versions)")
            run.provider.archive_environment(change.name, run.loaded.stack.stack)

    def adopt(self, run: Applying, change: ResourceChange, desired: Resource, say: Say) -> None:
        """Its version gets the tags (the content hash only when the content matches: else the stack's content is
        registered as a new version next)."""
        say("progress", f"importing {change.importing} version {change.before['version']}")
        tags = desired.tags if change.actions == NO_OP else {k: v for k, v in desired.tags.items() if k != TAG_HASH}
        run.provider.adopt_environment(change.name, change.before["version"], tags)

    def past(self, change: ResourceChange) -> str:
        if change.actions == UPDATE:
            return "released (versions archived, this stack's tags dropped)"
        return f"registered version {(change.after or {}).get('version')}"


ENVIRONMENT_STEPS = EnvironmentSteps()
