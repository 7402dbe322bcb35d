"""apply: execute a plan's changes against the provider, concurrently and in dependency order.

Cluster and environment changes are independent of each other (distributions, which depend on both, run
as smoke jobs after every change finished). Inside a replace the delete must finish, and the name be
verified gone, before the create; after the create the size is verified (guards the same-name race that
brings a cluster back with its OLD size). A failed change is reported with its Azure error code while the
others finish; Ctrl-C stops starting new changes and lets running ones finish.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

from infra_cli.azure.provider import Provider, azure_error_code, azure_error_message
from infra_cli.plan.desired import cluster_secrets
from infra_cli.plan.model import CREATE, DELETE, REPLACE, UPDATE, Plan, Resource, ResourceChange
from infra_cli.stack.load import LoadedStack

DEFAULT_PARALLELISM = 8


@dataclass(frozen=True)
class Event:
    address: str
    phase: str  # "start" | "progress" | "done" | "failed" | "skipped"
    text: str
    elapsed_s: float = 0.0


@dataclass
class Failure:
    address: str
    code: str
    message: str


@dataclass
class ApplyResult:
    added: int = 0
    changed: int = 0
    destroyed: int = 0
    failures: list[Failure] = field(default_factory=list)
    not_started: list[str] = field(default_factory=list)
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures and not self.not_started and not self.interrupted


class SizeMismatch(RuntimeError):
    code = "SizeMismatchAfterReplace"


class Applier:
    def __init__(self, provider: Provider, loaded: LoadedStack, emit: Callable[[Event], None]):
        self.provider = provider
        self.loaded = loaded
        self.emit = emit

    def run_change(self, change: ResourceChange, desired: Resource | None) -> None:
        start = time.monotonic()

        def say(phase: str, text: str) -> None:
            self.emit(Event(change.address, phase, text, time.monotonic() - start))

        if change.type == "cluster":
            if change.actions in (DELETE, REPLACE):
                say("progress", "destroying" if change.actions == DELETE else "destroying (replace, step 1 of 2)")
                self.provider.delete_cluster(change.name)
            if change.actions in (CREATE, REPLACE, UPDATE):
                verb = {tuple(CREATE): "creating", tuple(REPLACE): "creating (replace, step 2 of 2)",
                        tuple(UPDATE): "updating in place"}[tuple(change.actions)]
                say("progress", verb)
                cluster = self.loaded.stack.clusters[change.name]
                net = cluster.network_settings
                self.provider.put_cluster(desired, cluster_secrets(cluster), net.subnet if net else None,
                                          net.vnet_name if net else None)
                if change.actions == REPLACE:
                    live = self.provider.read_cluster(change.name)
                    want = desired.attributes["size"]
                    if live is None or live.attributes["size"].lower() != want.lower():
                        raise SizeMismatch(f"after the replace, {change.address} reports size "
                                           f"{live.attributes['size'] if live else '(gone)'} instead of {want}")
        elif change.type == "environment" and change.actions == CREATE:
            env = self.loaded.stack.environments[change.name]
            version = dict(desired.attributes, version=change.after["version"])
            resource = Resource(desired.address, desired.type, desired.name, version, desired.tags)
            say("progress", f"registering version {version['version']}")
            self.provider.create_environment_version(resource, self.loaded.base_dir, env.conda_file,
                                                     _build_files(env) if env.build else None)


def _build_files(env) -> Callable:
    """A build context for `build:`: the rendered template, or the user's directory."""
    from pathlib import Path

    def write(tmp: Path) -> Path:
        if env.build.template:
            from infra_cli.image.dockerfile import render_dockerfile

            (tmp / "Dockerfile").write_text(render_dockerfile(env.build.template, env.build.parameters))
            return tmp
        return Path(env.build.path)

    return write


def execute(plan: Plan, loaded: LoadedStack, provider: Provider, *, parallelism: int = DEFAULT_PARALLELISM,
            emit: Callable[[Event], None] = lambda e: None, stop: threading.Event | None = None) -> ApplyResult:
    stop = stop or threading.Event()
    result = ApplyResult()
    desired = {r.address: r for r in plan.desired}
    applier = Applier(provider, loaded, emit)
    pending = [c for c in plan.resource_changes if c.is_change]
    # destroys first: they free quota and names the creates may need
    pending.sort(key=lambda c: (0 if c.actions == DELETE else 1, c.address))
    running: dict[Future, tuple[ResourceChange, float]] = {}

    def finished(fut: Future) -> None:
        change, start = running.pop(fut)
        elapsed = time.monotonic() - start
        exc = fut.exception()
        if exc is None:
            if change.actions == DELETE:
                result.destroyed += 1
            elif change.actions == UPDATE:
                result.changed += 1
            elif change.actions == REPLACE:
                result.added += 1
                result.destroyed += 1
            else:
                result.added += 1
            emit(Event(change.address, "done", _past(change), elapsed))
        else:
            code = getattr(exc, "code", None) if isinstance(exc, SizeMismatch) else azure_error_code(exc)
            failure = Failure(change.address, str(code), azure_error_message(exc))
            result.failures.append(failure)
            emit(Event(change.address, "failed", f"{failure.code}: {failure.message}", elapsed))

    with ThreadPoolExecutor(max_workers=max(1, parallelism)) as pool:
        try:
            while pending or running:
                while pending and len(running) < parallelism and not stop.is_set():
                    change = pending.pop(0)
                    emit(Event(change.address, "start", _verb(change)))
                    fut = pool.submit(applier.run_change, change, desired.get(change.address))
                    running[fut] = (change, time.monotonic())
                if stop.is_set() and not running:
                    break
                done, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in done:
                    finished(fut)
        except KeyboardInterrupt:
            stop.set()
            result.interrupted = True
            emit(Event("-", "progress", "interrupted: starting nothing new, waiting for running changes"))
            for fut in list(running):
                try:
                    fut.result()
                except BaseException:  # reported by finished() below
                    pass
                finished(fut)
    if stop.is_set():
        result.interrupted = True
        result.not_started = [c.address for c in pending]
        for address in result.not_started:
            emit(Event(address, "skipped", "not started (interrupted)"))
    return result


def _verb(change: ResourceChange) -> str:
    return {("create",): "creating", ("update",): "updating", ("delete",): "destroying",
            ("delete", "create"): "replacing"}.get(tuple(change.actions), "changing")


def _past(change: ResourceChange) -> str:
    if change.type == "environment":
        return f"registered version {(change.after or {}).get('version')}"
    return {("create",): "created", ("update",): "updated", ("delete",): "destroyed",
            ("delete", "create"): "replaced"}.get(tuple(change.actions), "changed")
