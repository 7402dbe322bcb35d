"""force-unlock as Terraform's (https://developer.hashicorp.com/terraform/cli/commands/force-unlock): it takes the
lock ID that every "locked" message shows and clears that lock only, never one taken since. It refuses a wrong
ID, and a lock whose holder still runs on this machine (the lock records its host, pid and machine identity:
state/lock.py) unless --force is given: clearing a live apply's lock lets a second apply write beside it."""

from __future__ import annotations

from pathlib import Path

from infra_cli.arguments import NextStep
from infra_cli.apply.engine import Backend
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says
from infra_cli.state.lock import LockChanged, LockInfo
from infra_cli.state.store import StateStore
from infra_cli.stack.variables import Inputs
from infra_cli.validate.engine import load_valid_stack


def force_unlock_stack(stack_path: Path, lock_id: str | None, *, force: bool, backend: Backend,
                       inputs: Inputs | None = None) -> LockInfo:
    """Clear the stack's lock if `lock_id` names it (None: only say which ID it has); returns the lock as it was
    (held False: there was none). Refusals are DiagnosticError, with nothing cleared."""
    loaded, _ = load_valid_stack(stack_path, inputs=inputs)
    stack, file = loaded.stack.stack, str(stack_path)
    store = StateStore(backend(loaded.stack.workspace))
    info = store.read_lock(stack)
    if not info.held:
        return info
    assert info.lock_id is not None     # a held lock has one
    run = NextStep(("infra", "force-unlock"), (info.lock_id, file))
    held = (f"stack {stack!r} is locked by {info.holder} since {info.since} ({info.operation}), "
            f"lock ID {info.lock_id}")

    def refuse(rule: str, message: str, hint: str) -> DiagnosticError:
        return DiagnosticError([Diagnostic("error", rule, f"{message}; nothing was cleared", file, None, None, hint)])

    if lock_id is None:
        raise refuse("lock.id-required", f"{held}: force-unlock takes the ID of the lock it clears (so that it never "
                     "clears a lock taken since)", says("if that process is gone, run ", run))
    if not info.is_lock_id(lock_id):
        raise refuse("lock.id-mismatch", f"{held}, not {lock_id[:80]!r}",
                     says("give the ID the \"locked\" message shows; if that holder is gone, run ", run))
    if info.holder_is_alive_here() and not force:
        raise refuse("lock.holder-alive", f"{held}: its holder, pid {info.pid} on this machine, is still running, and "
                     "clearing its lock would let another apply write the stack beside it",
                     says(f"wait for it to finish, or stop it (kill {info.pid}) and run ", run, " again; to clear the "
                          "lock of a live process anyway, add --force"))
    try:
        store.force_unlock(stack, info)
    except LockChanged as changed:
        now = (f"now locked by {changed.now.holder} since {changed.now.since}, lock ID {changed.now.lock_id}"
               if changed.now.held else "since released")
        raise refuse("lock.changed", f"the lock of stack {stack!r} (lock ID {info.lock_id}) changed while it was "
                     f"being cleared ({now})",
                     says("run ", NextStep(("infra", "force-unlock"), (file,)), " to see its lock now"))
    return info
