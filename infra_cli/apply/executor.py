"""apply: execute a plan's changes against the provider, concurrently and in dependency order.

Cluster and environment changes are independent of each other (distributions, which depend on both, run
as smoke jobs after every change finished). Inside a replace the delete must finish, and the name be
verified gone, before the create; after the create the size is verified (guards the same-name race that
brings a cluster back with its OLD size). A failed change is reported with its Azure error code while the
others finish; Ctrl-C stops starting new changes and lets running ones finish.

A transient failure (throttling or a server fault that outlasted the SDK's retries, or a long-running
operation that ended Failed with a transient code: validators/update_semantics.yaml) is tried again, a
bounded number of times, from what Azure then shows: the cluster is read once it is no longer busy; absent, it
is created; Failed, or differing in a field that forces replacement, it is deleted and created; otherwise the
PUT is repeated (idempotent). So one apply converges through failed operations, and the next plan is empty.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

from infra_cli.azure.errors import azure_error_code, azure_error_message, is_transient
from infra_cli.azure.protocol import Provider
from infra_cli.apply.kinds import STEPS, SizeMismatch
from infra_cli.knowledge.update_semantics import transient_errors
from infra_cli.plan.api import DELETE, NO_OP, REPLACE, UPDATE, Plan, Resource, ResourceChange
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
    imported: int = 0
    added: int = 0
    changed: int = 0
    destroyed: int = 0
    failures: list[Failure] = field(default_factory=list)
    not_started: list[str] = field(default_factory=list)
    interrupted: bool = False
    retired: list[str] = field(default_factory=list)   # infra's records archived after a destroy (StateStore.retire)

    @property
    def ok(self) -> bool:
        return not self.failures and not self.not_started and not self.interrupted


class Applier:
    def __init__(self, provider: Provider, loaded: LoadedStack, emit: Callable[[Event], None], *,
                 poll_s: float = 0.5, settle_timeout_s: float = 1800.0, retry_pause_s: float = 1.0):
        self.provider = provider
        self.loaded = loaded
        self.emit = emit
        self.poll_s, self.settle_timeout_s, self.retry_pause_s = poll_s, settle_timeout_s, retry_pause_s

    def run_change(self, change: ResourceChange, desired: Resource | None) -> None:
        start = time.monotonic()

        def say(phase: str, text: str) -> None:
            self.emit(Event(change.address, phase, text, time.monotonic() - start))

        attempts = transient_errors().max_attempts
        for attempt in range(1, attempts + 1):
            try:
                self._step(change, desired, say, first=attempt == 1)
                return
            except SizeMismatch:
                raise
            except Exception as exc:
                if attempt == attempts or not is_transient(exc):
                    raise
                say("progress", f"{azure_error_code(exc)}: {azure_error_message(exc)}; trying again "
                                f"(attempt {attempt + 1} of {attempts})")
                time.sleep(self.retry_pause_s * attempt)

    def _step(self, change: ResourceChange, desired: Resource | None, say: Callable[[str, str], None], *,
              first: bool) -> None:
        steps = STEPS[change.type]
        if change.importing is not None:
            assert desired is not None      # an import block adopts a resource the stack declares
            steps.adopt(self, change, desired, say)
            if change.actions == NO_OP:
                return
        steps.step(self, change, desired, say, first=first)


def execute(plan: Plan, loaded: LoadedStack, provider: Provider, *, parallelism: int = DEFAULT_PARALLELISM,
            emit: Callable[[Event], None] = lambda e: None, stop: threading.Event | None = None,
            retry_pause_s: float = 1.0) -> ApplyResult:
    """retry_pause_s: the pause before a change's second attempt (n times it before the n+1st)."""
    stop = stop or threading.Event()
    result = ApplyResult()
    desired = {r.address: r for r in plan.desired}
    applier = Applier(provider, loaded, emit, retry_pause_s=retry_pause_s)
    pending = [c for c in plan.resource_changes if c.is_change]
    # destroys first: they free quota and names the creates may need
    pending.sort(key=lambda c: (0 if c.actions == DELETE else 1, c.address))
    running: dict[Future, tuple[ResourceChange, float]] = {}

    def finished(fut: Future) -> None:
        change, start = running.pop(fut)
        elapsed = time.monotonic() - start
        exc = fut.exception()
        if exc is None:
            if change.importing is not None:
                result.imported += 1
            if change.actions == NO_OP:
                pass
            elif change.actions == DELETE:
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
                    change = pending[0]   # taken from pending once running: a Ctrl-C before leaves it not started
                    emit(Event(change.address, "start", _verb(change)))
                    fut = pool.submit(applier.run_change, change, desired.get(change.address))
                    running[fut] = (change, time.monotonic())
                    pending.pop(0)
                if stop.is_set() and not running:
                    break
                done, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in done:
                    finished(fut)
        except KeyboardInterrupt:
            stop.set()
            result.interrupted = True
            emit(Event("", "progress", f"Interrupted (Ctrl-C): starting nothing new; waiting for the {len(running)} "
                       "change(s) already running to finish (Ctrl-C again stops waiting: Azure goes on with them)"))
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
    if change.actions == NO_OP and change.importing is not None:
        return "importing"
    return change.action.verb


def _past(change: ResourceChange) -> str:
    if change.actions == NO_OP and change.importing is not None:
        return "imported"
    return STEPS[change.type].past(change)
