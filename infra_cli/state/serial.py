"""The stack's lineage and serial, as Terraform keeps them in its state: what a saved plan is bound to in time.

Terraform's state carries a `lineage` (a random id made when the state is first written, kept for its whole
life) and a `serial` (bumped on every write); a saved plan records both, and applying it refuses a state whose
lineage or serial is not the one the plan was made against ("Saved plan is stale"). Lineage and serial as
Terraform documents them: https://developer.hashicorp.com/terraform/cli/commands/state/push

infra keeps no state file, so the pair lives on Azure beside the stack lock (lock.py): the versions of an Azure
ML environment `infra-state-<stack>`, version N being serial N, whose tags carry the lineage. Versions are
immutable, so two writers can never register the same serial. The lineage is made by the stack's first apply
that writes; before it, a stack has no lineage and serial 0. Every apply (and destroy) that writes registers the
next serial under the lock, before its first write (store.py StateStore.bump_serial). Plain data here; the reads
and writes are store.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


LINEAGE_TAG, SERIAL_TAG = "infra.state.lineage", "infra.state.serial"
OPERATION_TAG, AT_TAG, TOKEN_TAG = "infra.state.operation", "infra.state.at", "infra.state.token"
# Whose state this is. Not infra.stack (ownership): the serial outlives a destroy, as Terraform keeps an empty state
# with its lineage and serial, so a plan made before the destroy is stale after it; and a destroy leaves nothing
# that carries the stack's ownership tag.
STATE_OF_TAG = "infra.state.of"


def serial_name(stack: str) -> str:
    """The environment whose versions are the stack's serials (beside the lock's `infra-lock-<stack>`)."""
    return f"infra-state-{stack}"


@dataclass(frozen=True)
class StateSerial:
    """Where a stack's state stands: `lineage` None and `serial` 0 before its first apply that writes."""

    lineage: str | None = None
    serial: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"lineage": self.lineage, "serial": self.serial}

    @classmethod
    def from_json(cls, data: Any) -> "StateSerial":
        """A plan file's `state`; a TypeError naming what is wrong (planfile.py refuses the file with it)."""
        if not isinstance(data, dict):
            raise TypeError("state is a mapping with lineage and serial")
        lineage, serial = data.get("lineage"), data.get("serial")
        if not (lineage is None or isinstance(lineage, str) and lineage):
            raise TypeError("state.lineage is a string or null")
        if not isinstance(serial, int) or isinstance(serial, bool) or serial < 0:
            raise TypeError("state.serial is a whole number, 0 or more")
        return cls(lineage, serial)

    def describe(self) -> str:
        if self.lineage is None:
            return "serial 0 (nothing applied yet)" if self.serial == 0 else \
                f"serial {self.serial} without a lineage (a record infra did not write)"
        return f"serial {self.serial} of lineage {self.lineage}"


def serial_from_version(stack: str, version: Any, tags: dict[str, str] | None) -> StateSerial:
    """The serial an `infra-state-<stack>` version records (its version number: immutable, unlike a tag). A
    version without this stack's tag or a lineage (not written by infra) has no lineage: the next apply that
    writes starts one."""
    tags = tags or {}
    number = int(version) if str(version).isdigit() else 0
    lineage = tags.get(LINEAGE_TAG) if tags.get(STATE_OF_TAG) == stack else None
    return StateSerial(lineage or None, number)


def serial_tags(stack: str, serial: StateSerial, operation: str, at: str, token: str) -> dict[str, str]:
    return {STATE_OF_TAG: stack, LINEAGE_TAG: serial.lineage or "", SERIAL_TAG: str(serial.serial),
            OPERATION_TAG: operation, AT_TAG: at, TOKEN_TAG: token}
