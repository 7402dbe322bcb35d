"""Plan files: the diff, the desired state and the live fingerprint a plan saw. Mode 0600, no secrets.

Applying one re-reads the stack (for the secrets a create needs, which the file never holds) and refuses if
the stack's desired state or the live state's fingerprint no longer match what was planned.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.plan.model import FORMAT_VERSION, Plan, Resource, ResourceChange

KIND = "infra-plan"


@dataclass
class SavedPlan:
    plan: Plan
    stack_path: Path
    targets: list[str]


def write_plan_file(path: Path, plan: Plan, stack_path: Path, targets: list[str]) -> None:
    body = {
        "kind": KIND,
        **plan.to_json(mask_sensitive=False),
        "stack_path": str(stack_path),
        "targets": targets,
        "desired": [r.to_json() for r in plan.desired],
    }
    data = json.dumps(body, indent=2, sort_keys=True).encode()
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def is_plan_file(path: Path) -> bool:
    """A saved plan is a JSON object with our `kind` (a stack is YAML; JSON stacks are not a thing here)."""
    if not Path(path).is_file():  # a FIFO would block the open; the stack loader says what it is instead
        return False
    try:
        with open(path, "rb") as fh:
            if not fh.read(64).lstrip().startswith(b"{"):
                return False
            fh.seek(0)
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("kind") == KIND


def read_plan_file(path: Path) -> SavedPlan:
    def bad(message: str) -> DiagnosticError:
        return DiagnosticError([Diagnostic("error", "planfile.invalid", message, str(path), None, None,
                                           "create a fresh one with `infra plan STACK --out FILE`")])

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise bad(f"cannot read plan file: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise bad("not an infra plan file")
    if data.get("format_version") != FORMAT_VERSION:
        raise bad(f"plan file format {data.get('format_version')} is not {FORMAT_VERSION}")
    try:
        plan = Plan(
            stack=data["stack"], mode=data["mode"],
            resource_changes=[ResourceChange.from_json(c) for c in data["resource_changes"]],
            smoke_jobs=list(data.get("smoke_jobs") or []), diagnostics=list(data.get("diagnostics") or []),
            live_fingerprint=data["live_fingerprint"],
            desired=[Resource.from_json(r) for r in data.get("desired") or []],
            smoke_reasons={k: v for k, v in (data.get("smoke_reasons") or {}).items() if v},
        )
        return SavedPlan(plan, Path(data["stack_path"]), list(data.get("targets") or []))
    except (KeyError, TypeError) as exc:
        raise bad(f"plan file is missing {exc}") from None
