"""The state store: one interface over what infra remembers on Azure for a stack, read and written through the
provider the command built (azure/protocol.py Provider).

- the lock: one apply or destroy per stack and workspace at a time (lock.py);
- retirement: after a destroy, the lock and the smoke records are archived as its environments are;
- smoke records: the last smoke of each distribution, with the inputs it was judged on (records.py). Plan reads
  them in the same batch as the stack's environments (plan/live.py read_live, `records_from`), so a plan costs
  no extra request for them;
- the lineage and serial: where the stack's state stands, bumped by every apply that writes (serial.py), read by
  plan in the same batch as the environments and again by apply under the lock, so a saved plan made against an
  older serial is refused;
- ownership: the tags infra writes on everything it creates (conventions.py OWNERSHIP_TAGS), which the provider
  reads with each resource.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from infra_cli.azure.lock_store import LockWriteRefused
from infra_cli.azure.protocol import Provider
from infra_cli.state.lock import LockInfo, StackLock, force_unlock, read_lock
from infra_cli.state.records import SmokeRecord, record_from_tags, record_tags
from infra_cli.state.serial import TOKEN_TAG, StateSerial, serial_from_version, serial_name, serial_tags


class StateStore:
    def __init__(self, provider: Provider):
        self.provider = provider

    def lock(self, stack: str, operation: str) -> StackLock:
        """The stack's lock, taken on entering a `with` block and released on leaving it."""
        return StackLock(self.provider, stack, operation)

    def read_lock(self, stack: str) -> LockInfo:
        """The stack's lock as it stands: held or free, by whom, its lock ID."""
        return read_lock(self.provider, stack)

    def force_unlock(self, stack: str, seen: LockInfo) -> None:
        """Clear the lock read as `seen` (LockChanged if it is no longer that lock)."""
        force_unlock(self.provider, stack, seen)

    serial_name = staticmethod(serial_name)

    def serial(self, stack: str) -> StateSerial:
        """The stack's lineage and serial now (one read of the latest version)."""
        latest = self.provider.latest_record(serial_name(stack))
        return StateSerial() if latest is None else serial_from_version(stack, *latest)

    @staticmethod
    def serial_from(stack: str, values: dict[str, Any] | None) -> StateSerial:
        """The serial from the environment read in plan's batch (provider.read_environments' answer for it)."""
        if not values or values.get("version") is None:
            return StateSerial()
        return serial_from_version(stack, values["version"], values.get("tags"))

    def bump_serial(self, stack: str, current: StateSerial, operation: str) -> StateSerial:
        """Register the next serial (a new lineage when the stack has none): called under the stack's lock, before
        the first write of an apply, so every plan made before it is stale. A refused registration is read back
        (it may have landed before the error); anything else is Azure's error, raised before anything is written."""
        after = StateSerial(current.lineage or str(uuid.uuid4()), current.serial + 1)
        token = uuid.uuid4().hex
        at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self.provider.register_record(serial_name(stack), after.serial,
                                          serial_tags(stack, after, operation, at, token),
                                          description=f"infra state serial of stack {stack} (do not use in jobs)")
        except LockWriteRefused as refused:
            latest = self.provider.latest_record(serial_name(stack))
            if latest is None or latest[0] != after.serial or latest[1].get(TOKEN_TAG) != token:
                raise refused.error from None
        return after

    def retire(self, stack: str, released_lock: StackLock) -> list[str]:
        """After a destroy: the stack's smoke records and lock archived, untagged (provider.retire_records), so
        nothing in the workspace carries the stack's tag. Returns the environments archived."""
        return self.provider.retire_records(stack, released_lock.name, released_lock.released)

    def record_name(self, stack: str, distribution: str) -> str:
        return self.provider.smoke_record_name(stack, distribution)

    def record_smoke(self, stack: str, record: SmokeRecord) -> None:
        self.provider.record_smoke(stack, record.distribution, record_tags(stack, record))

    @staticmethod
    def records_from(stack: str, names: dict[str, str], environments: dict[str, dict[str, Any] | None]
                     ) -> dict[str, SmokeRecord | None]:
        """distribution -> its record, from the environments read (`names`: distribution -> the record's name)."""
        return {d: record_from_tags(stack, d, found["tags"]) if (found := environments.get(n)) else None
                for d, n in names.items()}
