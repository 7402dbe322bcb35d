"""validators/launchers.yaml: which commands launch processes per node or from a head node, and their flags
by role (read by stack/launch.py, which parses a distribution's command against this table)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from infra_cli.knowledge.reader import at, fault, load, mapping, sequence

FILE = "launchers.yaml"
HINT = ("fix validators/launchers.yaml: each launcher needs kind (head-node or per-node), commands and source; "
        "python_interpreters, wrappers and shells are lists")
ROLES = ("processes", "processes_per_node", "processes_total", "nodes", "node_rank", "master_addr",
         "master_port", "rendezvous")


@dataclass(frozen=True)
class LauncherSpec:
    """One row of validators/launchers.yaml."""

    name: str
    kind: str                                   # head-node | per-node
    commands: tuple[tuple[str, ...], ...]       # executable words, e.g. ("accelerate", "launch")
    python_modules: tuple[str, ...] = ()
    boolean_flags: frozenset[str] = frozenset()
    flags: dict[str, tuple[str, ...]] = field(default_factory=dict)   # role -> flag names
    processes_default: int | str | None = None  # a number, "all_gpus", or None (unknown)
    nodes_default: int | None = None
    head_node_flags: tuple[str, ...] = ()
    per_node_flags: tuple[str, ...] = ()
    multi_node_requires: tuple[str, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class LauncherTable:
    launchers: tuple[LauncherSpec, ...]
    python_interpreters: tuple[str, ...]        # regular expressions for the interpreter's name
    wrappers: frozenset[str]
    shells: frozenset[str]

    def is_python(self, word: str) -> bool:
        base = word.rsplit("/", 1)[-1]
        return any(re.fullmatch(p, base) for p in self.python_interpreters)


def _launcher(name: str, row: Any) -> LauncherSpec:
    row = mapping(row, "a launcher")
    if row["kind"] not in ("head-node", "per-node"):
        raise fault(f"kind must be head-node or per-node, not {row['kind']!r}", "kind")
    commands = tuple(tuple(c) if isinstance(c, list) else (c,) for c in sequence(row["commands"], "commands"))
    return LauncherSpec(
        name, row["kind"], commands, tuple(sequence(row.get("python_modules"), "python_modules")),
        frozenset(sequence(row.get("boolean_flags"), "boolean_flags")),
        {r: tuple(sequence(row[r], r)) for r in ROLES if row.get(r)},
        row.get("processes_default"), row.get("nodes_default"),
        tuple(sequence(row.get("head_node_flags"), "head_node_flags")),
        tuple(sequence(row.get("per_node_flags"), "per_node_flags")),
        tuple(sequence(row.get("multi_node_requires"), "multi_node_requires")), str(row["source"]))


def _table(data: Any) -> LauncherTable:
    data = mapping(data, FILE)
    specs = []
    for name, row in mapping(data["launchers"], "launchers").items():
        with at("launchers", name):
            specs.append(_launcher(str(name), row))
    with at("python_interpreters"):
        interpreters = tuple(sequence(data["python_interpreters"], "python_interpreters"))
        for pattern in interpreters:
            re.compile(pattern)
    with at("wrappers"):
        wrappers = frozenset(sequence(data["wrappers"], "wrappers"))
    with at("shells"):
        shells = frozenset(sequence(data["shells"], "shells"))
    return LauncherTable(tuple(specs), interpreters, wrappers, shells)


def launchers() -> LauncherTable:
    return load(FILE, _table, hint=HINT)
