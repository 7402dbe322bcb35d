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
import hashlib
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from infra_cli.azure.lock_store import LockWriteRefused
from infra_cli.azure.protocol import RecordVersions


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
    machine: str | None = None  # where `pid` means a process: machine_identity() of the holder

    @property
    def lock_id(self) -> str | None:
        """What `infra force-unlock LOCK_ID` takes, shown by every "locked" message (Terraform's lock ID): the
        token of the acquisition, as a UUID; a lock an older infra took (no token) is named by its version."""
        if not self.held:
            return None
        if self.token and len(self.token) == 32 and all(c in "0123456789abcdef" for c in self.token):
            return str(uuid.UUID(hex=self.token))
        return self.token or str(self.version)

    def is_lock_id(self, given: str) -> bool:
        """Whether `given` names this lock (hyphens and case aside, as a UUID may be written)."""
        return self.lock_id is not None and _bare_id(given) == _bare_id(self.lock_id)

    def _pid_here(self) -> bool:
        """Whether `pid` names a process of this machine. "This machine" is machine_identity(), not the host name:
        two machines (or containers) may share a name, and a pid means nothing on another one."""
        here = machine_identity()
        return (self.held and self.host == socket.gethostname() and self.pid is not None and here is not None
                and self.machine == here)

    def holder_is_dead_here(self) -> bool:
        """Held by a process of this machine that no longer exists (a killed apply): safe to take over. A lock
        without the machine identity (an older infra) is never taken over."""
        return self._pid_here() and self.pid is not None and _process_state(self.pid) == "gone"

    def holder_is_alive_here(self) -> bool:
        """Held by a process of this machine that still runs (or may: one of another user): force-unlock refuses
        it without --force. A pid reused since by another process reads as alive too (the cautious answer)."""
        return self._pid_here() and self.pid is not None and _process_state(self.pid) != "gone"


def _bare_id(text: str) -> str:
    return text.strip().replace("-", "").lower()


def _process_state(pid: int) -> str:
    """"gone" (no such process), "alive", or "other" (a process this user may not signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "other"
    return "alive"


class LockHeld(Exception):
    def __init__(self, info: LockInfo, stack: str):
        self.info, self.stack = info, stack
        super().__init__(f"stack {stack!r} is locked by {info.holder} (lock ID {info.lock_id}) since {info.since} "
                         f"({info.operation})")


class LockChanged(Exception):
    """force-unlock found the lock other than it read it (released, or taken again) when it came to clear it."""

    def __init__(self, seen: LockInfo, now: LockInfo, stack: str):
        self.seen, self.now, self.stack = seen, now, stack
        super().__init__(f"the lock of stack {stack!r} changed while it was being cleared")


def _read(records: RecordVersions, name: str) -> LockInfo:
    latest = records.latest_record(name)
    if latest is None:
        return LockInfo(False, None, None, None, 0)
    version, tags = latest
    return LockInfo(tags.get("infra.lock") == "held", tags.get("infra.lock.holder"), tags.get("infra.lock.since"),
                    tags.get("infra.lock.operation"), version, tags.get("infra.lock.host"),
                    int(tags["infra.lock.pid"]) if str(tags.get("infra.lock.pid", "")).isdigit() else None,
                    tags.get("infra.lock.token"), tags.get(MACHINE_TAG))


MACHINE_TAG = "infra.lock.machine"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_MACHINE_ID = Path("/etc/machine-id")
_PID_NAMESPACE = "/proc/self/ns/pid"


def machine_identity() -> str | None:
    """Where a pid names one process: this machine's id (machine-id(5), when it has one), this boot of its kernel
    (boot_id: pids restart at a reboot) and this pid namespace (containers on one kernel share its boot_id but
    not their pids), hashed. None where they cannot be read (not Linux): such a lock is never taken over."""
    try:
        boot = _BOOT_ID.read_text(encoding="ascii").strip()
        namespace = os.readlink(_PID_NAMESPACE)
    except OSError:
        return None
    try:
        machine = _MACHINE_ID.read_text(encoding="ascii").strip()
    except OSError:
        machine = ""
    return hashlib.sha256(f"{machine}\n{boot}\n{namespace}".encode()).hexdigest()[:32]


def holder_id() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user database entry (containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


class StackLock:
    def __init__(self, records: RecordVersions, stack: str, operation: str):
        self.records, self.stack, self.name, self.operation = records, stack, lock_name(stack), operation
        self.version: int | None = None
        self.released: int | None = None   # the "free" version the last release registered (or found landed)

    def acquire(self, *, attempts: int = 3) -> None:
        for attempt in range(attempts):
            info = _read(self.records, self.name)
            if info.held and not info.holder_is_dead_here():
                raise LockHeld(info, self.stack)
            version, token = info.version + 1, uuid.uuid4().hex
            tags = {"infra.lock": "held", "infra.lock.holder": holder_id(), "infra.lock.operation": self.operation,
                    "infra.lock.since": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "infra.lock.host": socket.gethostname(), "infra.lock.pid": str(os.getpid()),
                    "infra.lock.token": token, **({MACHINE_TAG: machine} if (machine := machine_identity()) else {})}
            try:
                self.records.register_record(self.name, version, tags)
            except LockWriteRefused as refused:
                now = _read(self.records, self.name)
                if now.token == token:
                    self.version = version      # the service kept our registration before the error
                    return
                if now.version < version:
                    raise refused.error from None   # nobody registered it: a transient error, say what it was
                if now.held and now.token != token:
                    raise LockHeld(now, self.stack) from None
                if attempt + 1 == attempts:
                    raise refused.error from None
                continue                        # we lost a race to a holder who has already released
            self.version = version
            return

    def release(self, *, attempts: int = 3) -> None:
        """Register the "free" version; an error is read back (the release may have landed) and tried again,
        so a transient fault at the end of an apply does not leave the stack locked."""
        if self.version is None:
            return
        for attempt in range(attempts):
            try:
                self.records.register_record(self.name, self.version + 1, {"infra.lock": "free"})
                break
            except LockWriteRefused as refused:
                if _read(self.records, self.name).version > self.version:
                    break       # the release landed before the error
                if attempt + 1 == attempts:
                    raise refused.error from None
        self.released, self.version = self.version + 1, None

    def __enter__(self) -> "StackLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_lock(records: RecordVersions, stack: str) -> LockInfo:
    """The stack's lock as it stands (one read of its latest version)."""
    return _read(records, lock_name(stack))


def force_unlock(records: RecordVersions, stack: str, seen: LockInfo) -> None:
    """Clear the lock `seen` (read_lock's answer, checked by the caller): the "free" version registered is the one
    after it, so a lock released or taken again meanwhile (that version exists: versions are immutable) is left
    as it is and raised as LockChanged, never cleared in its new holder's hands."""
    if not seen.held:
        return
    token = uuid.uuid4().hex
    try:
        records.register_record(lock_name(stack), seen.version + 1,
                                {"infra.lock": "free", "infra.lock.cleared": holder_id(),
                                 "infra.lock.cleared.id": seen.lock_id or "", "infra.lock.token": token})
    except LockWriteRefused as refused:
        now = _read(records, lock_name(stack))
        if now.version <= seen.version:
            raise refused.error from None    # nobody registered it: Azure's transient error, as it was
        if now.version == seen.version + 1 and now.token == token:
            return                           # ours, kept by the service before the error
        raise LockChanged(seen, now, stack) from None
