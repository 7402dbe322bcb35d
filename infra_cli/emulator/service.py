"""The emulated service's model: state, world, faults and the rules shared by all handlers.

Handlers (ml_*.py, compute_rp.py) are functions (service, request, **path groups) -> Response; they keep
no state of their own. Long-running operations are data: each records what the resource becomes when it
succeeds and when it fails, and `settle()` applies those whose time has come, at the start of every request,
so no timer thread is needed and a restart finishes what was in flight.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from infra_cli.emulator.auth import ensure_token
from infra_cli.emulator.blobs import BlobStore
from infra_cli.emulator.faults import FaultInjector
from infra_cli.emulator.state import Operation, Store
from infra_cli.emulator.wire import ArmError, Request
from infra_cli.emulator.world import World

if TYPE_CHECKING:       # runner.py imports this module
    from infra_cli.emulator.runner import JobRunner

ML_PROVIDER = "Microsoft.MachineLearningServices"
_DEFAULT_PAGE_SIZE = 50
_GONE = "__deleted__"   # payload marker: the resource is removed


@dataclass(frozen=True)
class Scope:
    """A workspace's address in ARM."""

    subscription: str
    resource_group: str
    workspace: str

    @property
    def key(self) -> str:
        return f"{self.subscription}/{self.resource_group}/{self.workspace}".lower()

    @property
    def group_key(self) -> str:
        return f"{self.subscription}/{self.resource_group}".lower()

    @property
    def arm_id(self) -> str:
        return (f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
                f"/providers/{ML_PROVIDER}/workspaces/{self.workspace}")


class EmulatedService:
    def __init__(self, state_dir: Path, world: World, faults: FaultInjector):
        self.state_dir = state_dir
        self.store = Store(state_dir)
        self.world = world
        self.faults = faults
        self.token = ensure_token(state_dir)   # what every request must prove it holds (emulator/auth.py)
        self.blobs = BlobStore(self.store, state_dir / "blobs", self.token)
        self.page_size = _DEFAULT_PAGE_SIZE
        # A list's nextLink as some resource providers write it: its $skipToken only, no api-version, which the
        # client adds back (as the SDKs' generated paging does); tests set it to hold a client to that
        self.next_link_api_version = True
        self.base_url = ""      # "https://127.0.0.1:PORT/", set once the server is bound
        self.runner: JobRunner | None = None   # set by the server (jobs run in this process)

    def close(self) -> None:
        self.store.close()

    # workspaces
    def workspace(self, scope: Scope) -> dict:
        body = self.store.get("workspace", scope.group_key, scope.workspace)
        if body is None:
            raise ArmError(404, "ResourceNotFound",
                           f"The Resource '{ML_PROVIDER}/workspaces/{scope.workspace}' under resource group "
                           f"'{scope.resource_group}' was not found. For more details please go to "
                           "https://aka.ms/ARMResourceNotFoundFix")
        return body

    def check_name(self, kind: str, name: str) -> None:
        rule = self.world.names.get(kind)
        if rule is not None and not rule.pattern.fullmatch(name):  # `$` alone would accept a final newline
            raise ArmError(400, "ValidationError", f"The {kind} name '{name}' is invalid: it must be {rule.rule}.",
                           target="name")

    # long-running operations
    def start_operation(self, type_: str, scope: Scope, name: str, action: str, *, on_success: dict | None,
                        on_failure: dict | None, delay_s: float | None = None) -> Operation:
        """Record an operation that, after the provisioning delay, leaves the resource as on_success
        (None: removed) or, when fault injection fails it, as on_failure (None: removed)."""
        delay = self.faults.config.provisioning_delay_s if delay_s is None else delay_s
        op = Operation(
            id=uuid.uuid4().hex, type=type_, scope=scope.key, name=name, action=action, due=time.time() + delay,
            fails=self.faults.lro_fails(), status="InProgress", error=None,
            payload={"success": _GONE if on_success is None else on_success,
                     "failure": _GONE if on_failure is None else on_failure})
        self.store.add_operation(op)
        return op

    def settle(self) -> None:
        with self.store.lock:
            for op in self.store.operations(status="InProgress", due_before=time.time()):
                outcome = (op.payload or {}).get("failure" if op.fails else "success", _GONE)
                if outcome == _GONE:
                    self.store.delete(op.type, op.scope, op.name)
                else:
                    self.store.put(op.type, op.scope, op.name, outcome)
                error = {"code": "InternalServerError",
                         "message": f"The {op.action} operation on '{op.name}' failed (injected by the emulator's "
                                    "lro_failure_rate)."} if op.fails else None
                self.store.finish_operation(op.id, "Failed" if op.fails else "Succeeded", error)

    @staticmethod
    def poll_after(op: Operation) -> dict[str, str]:
        """When a client should look again at an operation in progress: when it is due, not later.

        ARM's Retry-After is whole seconds; without one, azure-core's pollers wait their default interval (30 s
        in azure-ai-ml and azure-mgmt-*), which made an SDK user's create take 31 s for a 2 s operation. The
        whole seconds go in Retry-After, the last second in retry-after-ms, which azure-core also honours
        (azure/core/pipeline/policies/_utils.py get_retry_after); a Retry-After of 0 would count as none."""
        if op.status != "InProgress":
            return {}
        remaining = op.due - time.time()
        if remaining >= 1:
            return {"Retry-After": str(int(remaining))}
        return {"retry-after-ms": str(max(10, math.ceil(remaining * 1000)))}

    def operation_url(self, op: Operation, location: str, api_version: str) -> str:
        sub = op.scope.split("/")[0]
        return (f"{self.base_url}subscriptions/{sub}/providers/{ML_PROVIDER}/locations/{location}"
                f"/computeOperationsStatus/{op.id}?{urlencode({'api-version': api_version})}")

    # lists
    def page(self, req: Request, items: list) -> dict:
        """One page of a list answer with ARM's nextLink (a $skipToken the emulator understands)."""
        start = int(req.query.get("$skiptoken") or 0)
        end = start + self.page_size
        result: dict = {"value": items[start:end]}
        if end < len(items):
            query = {k: v for k, v in req.query.items()
                     if k != "$skiptoken" and (self.next_link_api_version or k != "api-version")}
            query["$skipToken"] = str(end)
            result["nextLink"] = f"{self.base_url.rstrip('/')}{req.path}?{urlencode(query)}"
        return result
