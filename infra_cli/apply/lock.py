"""The stack lock: one apply (or destroy) per stack and workspace at a time, across machines.

The lock lives in the workspace itself, as the versions of an Azure ML environment named
`infra-lock-<stack>`. Azure ML environment versions are immutable: registering version N+1 succeeds for
exactly one writer, a second writer with different content is refused. That gives atomic
create-if-absent with no extra service, in Azure and in the local emulator alike. The latest version's
tags say whether the lock is held, by whom and since when; releasing registers a "free" version.

A failed registration is read back before it is believed: the version may be ours after all (an error
after the service committed it), someone else's (they hold the lock), or nobody's (a transient error,
raised as such rather than reported as a lock held by nobody).
"""

from __future__ import annotations

import getpass
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

LOCK_IMAGE = "mcr.microsoft.com/azureml/infra-lock:none"  # never pulled: the version records the lock only


def lock_name(stack: str) -> str:
    return f"infra-lock-{stack}"


@dataclass(frozen=True)
class LockInfo:
    held: bool
    holder: str | None
    since: str | None
    operation: str | None
    version: int
    host: str | None = None
    pid: int | None = None
    token: str | None = None   # unique per acquisition: tells our own registration from another's

    def holder_is_dead_here(self) -> bool:
        """Held by a process of this machine that no longer exists (a killed apply): safe to take over."""
        if not self.held or self.host != socket.gethostname() or self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class LockHeld(Exception):
    def __init__(self, info: LockInfo):
        self.info = info
        super().__init__(f"the stack is locked by {info.holder} since {info.since} ({info.operation})")


def _read(ml: Any, name: str) -> LockInfo:
    from infra_cli.azure.provider import is_not_found

    try:
        env = ml.environments.get(name, label="latest")
    except Exception as exc:
        if not is_not_found(exc):
            raise
        return LockInfo(False, None, None, None, 0)
    tags = env.tags or {}
    version = int(env.version) if str(env.version).isdigit() else 0
    return LockInfo(tags.get("infra.lock") == "held", tags.get("infra.lock.holder"), tags.get("infra.lock.since"),
                    tags.get("infra.lock.operation"), version, tags.get("infra.lock.host"),
                    int(tags["infra.lock.pid"]) if str(tags.get("infra.lock.pid", "")).isdigit() else None,
                    tags.get("infra.lock.token"))


def _register(ml: Any, name: str, version: int, tags: dict[str, str]) -> None:
    from azure.ai.ml.entities import Environment

    # a unique image tag makes every writer's content differ, so only one PUT of a version can succeed
    ml.environments.create_or_update(Environment(
        name=name, version=str(version), image=f"{LOCK_IMAGE}-{uuid.uuid4().hex[:12]}", tags=tags,
        description="infra stack lock (do not use in jobs)"))


def holder_id() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user database entry (containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


class StackLock:
    def __init__(self, ml: Any, stack: str, operation: str):
        self.ml, self.name, self.operation = ml, lock_name(stack), operation
        self.version: int | None = None

    def acquire(self, *, attempts: int = 3) -> None:
        from azure.core.exceptions import HttpResponseError

        for attempt in range(attempts):
            info = _read(self.ml, self.name)
            if info.held and not info.holder_is_dead_here():
                raise LockHeld(info)
            version, token = info.version + 1, uuid.uuid4().hex
            tags = {"infra.lock": "held", "infra.lock.holder": holder_id(), "infra.lock.operation": self.operation,
                    "infra.lock.since": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "infra.lock.host": socket.gethostname(), "infra.lock.pid": str(os.getpid()),
                    "infra.lock.token": token}
            try:
                _register(self.ml, self.name, version, tags)
            except HttpResponseError:
                now = _read(self.ml, self.name)
                if now.token == token:
                    self.version = version      # the service kept our registration before the error
                    return
                if now.version < version:
                    raise                       # nobody registered it: a transient error, say what it was
                if now.held and now.token != token:
                    raise LockHeld(now) from None
                if attempt + 1 == attempts:
                    raise
                continue                        # we lost a race to a holder who has already released
            self.version = version
            return

    def release(self, *, attempts: int = 3) -> None:
        """Register the "free" version; an error is read back (the release may have landed) and tried again,
        so a transient fault at the end of an apply does not leave the stack locked."""
        from azure.core.exceptions import HttpResponseError

        if self.version is None:
            return
        for attempt in range(attempts):
            try:
                _register(self.ml, self.name, self.version + 1, {"infra.lock": "free"})
                break
            except HttpResponseError:
                if _read(self.ml, self.name).version > self.version:
                    break       # the release landed before the error
                if attempt + 1 == attempts:
                    raise
        self.version = None

    def __enter__(self) -> "StackLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def force_unlock(ml: Any, stack: str) -> LockInfo:
    """Clear a stale lock; returns what it was."""
    info = _read(ml, lock_name(stack))
    if info.held:
        _register(ml, lock_name(stack), info.version + 1, {"infra.lock": "free", "infra.lock.cleared": holder_id()})
    return info
