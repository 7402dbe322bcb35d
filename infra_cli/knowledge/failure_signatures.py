"""validators/failure_signatures.yaml: log lines that say why a smoke job failed, with the cause and the fix."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from infra_cli.knowledge.reader import at, load, mapping, sequence

FILE = "failure_signatures.yaml"
HINT = ("fix validators/failure_signatures.yaml: each signature needs id, pattern (a regular expression), "
        "cause, fix and source (fix_emulated and multi_node_only optional); {1}, {2}... in cause and fixes are the pattern's groups, "
        "{python} in fixes infra's own interpreter")


@dataclass(frozen=True)
class Signature:
    id: str
    regex: "re.Pattern[str]"
    cause: str              # with {0} (the match), {1}, {2}... (its groups)
    fix: str | None
    source: str
    # the fix where the job ran on the local emulator (with infra's own Python, not the environment's image);
    # None: `fix` holds there too
    fix_emulated: str | None = None
    # a cause only for a job on several nodes (a line NCCL prints on one node too, where it explains nothing)
    multi_node_only: bool = False


def _signatures(data: Any) -> tuple[Signature, ...]:
    out, seen = [], set()
    for i, row in enumerate(sequence(mapping(data, FILE)["signatures"], "signatures")):
        with at("signatures", i):
            row = mapping(row, "a signature")
            regex = re.compile(row["pattern"])
            with at("multi_node_only"):
                multi_node_only = row.get("multi_node_only", False)
                if not isinstance(multi_node_only, bool):
                    raise ValueError(f"must be true or false, not {multi_node_only!r}")
            sig = Signature(str(row["id"]), regex, str(row["cause"]), row.get("fix"), str(row["source"]),
                            row.get("fix_emulated"), multi_node_only)
            if sig.id in seen:
                raise ValueError(f"id {sig.id!r} is used twice")
            seen.add(sig.id)
            groups = ["x"] * (regex.groups + 1)  # the cause and fix name only groups the pattern has
            with at("cause"):
                sig.cause.format(*groups)
            with at("fix"):
                (sig.fix or "").format(*groups, python="x")
            with at("fix_emulated"):
                (sig.fix_emulated or "").format(*groups, python="x")
            out.append(sig)
    return tuple(out)


def signatures() -> tuple[Signature, ...]:
    return load(FILE, _signatures, hint=HINT)
