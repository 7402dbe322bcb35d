"""Output values read live: `infra output`, apply's closing `Outputs:`, and the plan's `Changes to Outputs:`.

In a plan, as Terraform shows values known from configuration: a cluster the plan creates or replaces has the
name, size, max_instances, location and ARM id (workspace + name) the stack sets, only its provisioning_state is
`(known after apply)`; an environment that gets a new version has its name, the version the plan assigns and its
asset id; a smoke that will run is unknown until it has run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.live import LiveRead, LiveState, read_live
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.model import ResourceChange
from infra_cli.plan.preflight import LIVE_JUDGED_RULES
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.outputs import UNKNOWN, Reference, evaluate, references
from infra_cli.stack.secret import Secret
from infra_cli.stack.source import needed_unknown
from infra_cli.state.records import SmokeRecord
from infra_cli.stack.variables import Inputs
from infra_cli.validate.engine import load_valid_stack

@dataclass(frozen=True)
class OutputValue:
    value: Any   # stack/outputs.py UNKNOWN when not known until apply; None when the resource does not exist
    sensitive: bool
    description: str | None = None

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN


def output_values(loaded: LoadedStack, live: LiveState, records: dict[str, SmokeRecord | None],
                  resolved: dict[str, str | None] | None = None, *, changes: list[ResourceChange] | None = None,
                  pending: Any = ()) -> dict[str, OutputValue]:
    """Each output's value from the live state; `changes` and `pending` (smoke.NAME) of a plan make the values
    they will change unknown."""
    stack = loaded.stack
    unknown = set(pending)   # a smoke that will run: its verdict, figures, job and time come from running it
    planned = {c.address: c for c in changes or []}

    def lookup(ref: Reference) -> Any:
        if ref.address in unknown:
            return UNKNOWN
        kind = KINDS.get(ref.type)
        if kind is not None:
            return kind.output(ref.name, ref.attribute, planned.get(ref.address), live, stack, resolved or {})
        record = records.get(ref.name)
        if record is None:
            return None
        return {"verdict": record.result, "busbw_gbps": record.busbw_gbps, "job_name": record.job,
                "ran_at": record.at}.get(ref.attribute)

    return {name: OutputValue(evaluate(o.value, lookup), o.sensitive, o.description)
            for name, o in stack.outputs.items()}


def _read(loaded: LoadedStack, provider: Any) -> LiveRead:
    stack = loaded.stack
    # a curated reference built from an unset variable (a command that reads the state) is not resolved
    curated = {name: env.curated for name, env in stack.environments.items()
               if env.curated and not needed_unknown(loaded.source, (("environments", name),), "")}
    return read_live(provider, desired_resources(loaded), curated=curated, stack=stack.stack,
                     distributions=list(stack.distributions))


def output_needs(loaded: LoadedStack, name: str) -> tuple[tuple[str, ...], ...]:
    """What output `name` is built from in the stack, beyond its name and workspace: its own declaration (a
    `${var.X}` in its text) and the declaration of each resource it reads whose outputs the stack's declaration
    gives (an environment's image and curated reference). A cluster's attributes and a smoke's verdict are read
    live: they need no variable."""
    output = loaded.stack.outputs[name]
    text = output.value.reveal() if isinstance(output.value, Secret) else output.value
    kinds = [(KINDS.get(ref.type), ref.name) for _, ref in (references(text) if isinstance(text, str) else ())
             if ref is not None]
    return (("outputs", name), *sorted({(kind.section, resource) for kind, resource in kinds
                                        if kind is not None and kind.outputs_read_declaration}))


def live_outputs(loaded: LoadedStack, provider: Any) -> dict[str, OutputValue]:
    """The outputs now, read from Azure through `provider`."""
    read = _read(loaded, provider)
    return output_values(loaded, read.state, read.records, read.resolved)


def _anything_live(stack: str, read: LiveRead) -> bool:
    """Whether Azure holds anything of the stack: a resource with its tag (an environment's live version) or a
    smoke record. Never applied, or destroyed: nothing (infra's state is the tags, so there are no outputs)."""
    live = read.state
    return any(r.owner_stack == stack and kind.exists(r) for kind in KINDS.values() for r in kind.live(live).values()) \
        or any(record is not None for record in read.records.values())


def read_outputs(stack_path: Path, *, backend: Callable[[Any], Any], inputs: Inputs | None = None,
                 name: str | None = None) -> tuple[LoadedStack, dict[str, OutputValue] | None, list[Diagnostic]]:
    """`infra output [NAME]`: load the stack, read Azure through the provider `backend` builds, evaluate its
    outputs; None when nothing of the stack exists in its workspace (Terraform with no state: no outputs to show).
    Outputs are evaluated from the live state, not recorded at apply, so an output built from a variable left
    unset (`inputs` needing only the stack's name and workspace) cannot be: output `name` is then refused
    (variable.missing, before Azure is read), and of all outputs it is left out, with the warning returned."""
    loaded, _ = load_valid_stack(stack_path, judged_live=LIVE_JUDGED_RULES, inputs=inputs)
    what = inputs.command if inputs is not None and inputs.command else says(NextStep(("infra", "output")))
    if name is not None and name in loaded.stack.outputs:
        missing = needed_unknown(loaded.source, output_needs(loaded, name), what)
        if missing:
            raise DiagnosticError(missing)
    left_out = {n: needed_unknown(loaded.source, output_needs(loaded, n), f"output {n!r}")
                for n in (loaded.stack.outputs if name is None else ())}
    warnings = [Diagnostic("warning", "output.left-out", f"output {n!r} is left out: {d.message}", d.file, d.line,
                           d.column, d.hint) for n, missing in left_out.items() for d in missing]
    if not loaded.stack.outputs:
        return loaded, {}, warnings
    read = _read(loaded, backend(loaded.stack.workspace))
    if not _anything_live(loaded.stack.stack, read):
        return loaded, None, warnings
    values = output_values(loaded, read.state, read.records, read.resolved)
    return loaded, {n: v for n, v in values.items() if not left_out.get(n)}, warnings


def no_outputs(loaded: LoadedStack, stack_path: Path | str, name: str | None = None) -> Diagnostic:
    """Why `infra output` has nothing to show for a stack of which nothing exists, and what to do: as Terraform's
    `No outputs found` warning (all outputs) and `Output "NAME" not found` error (one)."""
    why = (f"nothing of stack {loaded.stack.stack!r} exists in workspace {loaded.stack.workspace.name!r} "
           "(never applied, or destroyed)")
    hint = says(NextStep(("infra", "apply"), (str(stack_path),)), " creates it; outputs are read from what the stack "
                "created, live")
    if name is None:
        return Diagnostic("warning", "output.none", f"No outputs found: {why}", str(stack_path), None, None, hint)
    return Diagnostic("error", "output.not-found", f'Output "{name}" not found: {why}', str(stack_path), None, None,
                      hint)
