"""The stack lock: one apply (or destroy) per stack and workspace at a time, across machines.

The lock lives in the workspace itself, as the versions of an Azure ML environment named
`infra-lock-<stack>`. Azure ML environment versions are immutable: registering version N+1 succeeds for
exactly one writer, a second writer with different content is refused. That gives atomic
create-if-absent with no extra service, in Azure and in the local emulator alike. The latest version's
tags say whether the lock is held, by whom and since when; releasing registers a "free" version.
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
                    int(tags["infra.lock.pid"]) if str(tags.get("infra.lock.pid", "")).isdigit() else None)


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

    def acquire(self) -> None:
        from azure.core.exceptions import HttpResponseError

        info = _read(self.ml, self.name)
        if info.held and not info.holder_is_dead_here():
            raise LockHeld(info)
        version = info.version + 1
        tags = {"infra.lock": "held", "infra.lock.holder": holder_id(), "infra.lock.operation": self.operation,
                "infra.lock.since": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "infra.lock.host": socket.gethostname(), "infra.lock.pid": str(os.getpid())}
        try:
            _register(self.ml, self.name, version, tags)
        except HttpResponseError:
            # someone registered that version first: they hold the lock
            raise LockHeld(_read(self.ml, self.name)) from None
        self.version = version

    def release(self) -> None:
        if self.version is None:
            return
        _register(self.ml, self.name, self.version + 1, {"infra.lock": "free"})
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
