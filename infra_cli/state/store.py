"""The state store: one interface over what infra remembers on Azure for a stack, read and written through the
provider the command built (azure/protocol.py Provider).

- the lock: one apply or destroy per stack and workspace at a time (lock.py);
- retirement: after a destroy, the lock and the smoke records are archived as its environments are;
- smoke records: the last smoke of each distribution, with the inputs it was judged on (records.py). Plan reads
  them in the same batch as the stack's environments (plan/live.py read_live, `records_from`), so a plan costs
  no extra request for them;
- ownership: the tags infra writes on everything it creates (conventions.py OWNERSHIP_TAGS), which the provider
  reads with each resource.
"""

from __future__ import annotations

from typing import Any

from infra_cli.azure.protocol import Provider
from infra_cli.state.lock import LockInfo, StackLock, force_unlock
from infra_cli.state.records import SmokeRecord, record_from_tags, record_tags


class StateStore:
    def __init__(self, provider: Provider):
        self.provider = provider

    def lock(self, stack: str, operation: str) -> StackLock:
        """The stack's lock, taken on entering a `with` block and released on leaving it."""
        return StackLock(self.provider.clients.ml, stack, operation)

    def force_unlock(self, stack: str) -> LockInfo:
        return force_unlock(self.provider.clients.ml, stack)

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
        return {d: record_from_tags(stack, d, environments[n]["tags"]) if environments.get(n) else None
                for d, n in names.items()}
