"""A distribution's command as the rules read it (stack/launch.py parses it; validators/launchers.yaml knows
launchers): its training step, the distributions whose command starts a kind of launcher, whether processes
really start per node, and a diagnostic pointed at the command."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterator

from infra_cli.diagnostics import Diagnostic, Severity
from infra_cli.knowledge.launchers import launchers
from infra_cli.stack.launch import CommandSyntaxError, Launch, parse_steps, training_step
from infra_cli.stack.model import Distribution
from infra_cli.validate.rules.registry import Context


@lru_cache(maxsize=256)
def parsed_command(command: str) -> tuple[tuple[Launch, ...], str | None]:
    try:
        return tuple(parse_steps(command, launchers())), None
    except CommandSyntaxError as exc:
        return (), str(exc)


def training_launch(dist: Distribution) -> Launch | None:
    return training_step(list(parsed_command(dist.command)[0])) if dist.command else None


def launches_of(ctx: Context, kind: str) -> Iterator[tuple[str, Distribution, Launch]]:
    """(name, distribution, training step) of every distribution whose command starts a `kind` launcher."""
    for name, dist in ctx.stack.distributions.items():
        step = training_launch(dist)
        if step is not None and step.kind == kind:
            yield name, dist, step


def launched_per_node(dist: Distribution) -> bool:
    """How the processes really start: a command that starts a per-node launcher is per-node whatever
    `launcher:` declares (distribution.launcher-mismatch says that once; the rules judging per-process
    launch stay quiet rather than pile on)."""
    step = training_launch(dist)
    return dist.launcher == "per-node" or (step is not None and step.kind == "per-node")


def diagnostic_at_command(ctx: Context, name: str, rule_id: str, message: str, hint: str,
                          severity: Severity = "error") -> Diagnostic:
    return ctx.at(("distributions", name, "command"), rule_id, message, hint, severity)
