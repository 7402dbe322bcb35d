"""validators/frameworks.yaml: each training framework's distribution types and launchers, and what Azure
ML's launcher sets per distribution type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra_cli.diagnostics import Severity
from infra_cli.knowledge.reader import at, fault, load, mapping, sequence

FILE = "frameworks.yaml"
HINT = ("fix validators/frameworks.yaml: each framework needs types, launchers and source (imports: a list of "
        "module names); each distribution type may set needs_mpi, launcher_sets (severity: [VARIABLE...]), "
        "node_rank (a variable) and not_node_rank (a list); smoke_scripts maps a script to the modules it imports")


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    types: tuple[str, ...]
    launchers: tuple[str, ...]
    needs_mpi_with_type: tuple[str, ...]
    per_process_command_must_contain: str | None
    source: str
    script_launch: str = "per-process"        # what `python script.py` is: Lightning launches per node itself
    packages_with_type: dict[str, tuple[str, ...]] | None = None   # type -> requirement profiles it needs
    nodes_flags: tuple[str, ...] = ()         # Lightning's trainer flags
    devices_flags: tuple[str, ...] = ()
    trainer_keywords: dict[str, str] | None = None   # nodes/devices -> Trainer(...) keyword
    imports: tuple[str, ...] = ()             # the modules the smoke imports to initialise it (dotted names)


@dataclass(frozen=True)
class Frameworks:
    frameworks: dict[str, FrameworkInfo]
    types_needing_mpi: frozenset[str]
    launcher_variables: dict[str, dict[str, Severity]]
    node_rank: dict[str, str]          # distribution type -> the variable that is a node's rank
    not_node_rank: frozenset[str]      # variables that read like the node rank but are not
    smoke_scripts: dict[str, tuple[str, ...]]   # smoke script -> the modules it imports whatever the framework


def _framework(name: str, row: Any) -> FrameworkInfo:
    row = mapping(row, "a framework")
    return FrameworkInfo(
        name, tuple(sequence(row["types"], "types")), tuple(sequence(row["launchers"], "launchers")),
        tuple(sequence(row.get("needs_mpi_with_type"), "needs_mpi_with_type")),
        row.get("per_process_command_must_contain"), str(row["source"]), row.get("script_launch", "per-process"),
        {t: tuple(p) for t, p in mapping(row.get("packages_with_type") or {}, "packages_with_type").items()},
        tuple(sequence(row.get("nodes_flags"), "nodes_flags")),
        tuple(sequence(row.get("devices_flags"), "devices_flags")),
        dict(mapping(row.get("trainer_keywords") or {}, "trainer_keywords")),
        _modules(row.get("imports"), "imports"))


def _modules(value: Any, what: str) -> tuple[str, ...]:
    """Module names (dotted identifiers): they reach the job's command as arguments of its preflight."""
    names = tuple(str(m) for m in sequence(value, what))
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise fault(f"{name!r} is not a module name (dotted Python identifiers)", what)
    return names


def _frameworks(data: Any) -> Frameworks:
    data = mapping(data, FILE)
    out = {}
    for name, row in mapping(data["frameworks"], "frameworks").items():
        with at("frameworks", name):
            out[str(name)] = _framework(str(name), row)
    mpi: set[str] = set()
    not_node_rank: set[str] = set()
    variables: dict = {}
    node_rank: dict = {}
    for kind, row in mapping(data["distribution_types"], "distribution_types").items():
        with at("distribution_types", kind):
            row = mapping(row, "a distribution type")
            if row.get("needs_mpi"):
                mpi.add(str(kind))
            variables[str(kind)] = {str(var): _severity(severity) for severity, names in
                                    mapping(row.get("launcher_sets") or {}, "launcher_sets").items()
                                    for var in sequence(names, "launcher_sets")}
            if row.get("node_rank"):
                node_rank[str(kind)] = str(row["node_rank"])
            not_node_rank.update(map(str, sequence(row.get("not_node_rank"), "not_node_rank")))
    with at("smoke_scripts"):
        scripts = {str(k): _modules(v, str(k)) for k, v in mapping(data.get("smoke_scripts") or {}, "smoke_scripts").items()}
    return Frameworks(out, frozenset(mpi), variables, node_rank, frozenset(not_node_rank), scripts)


def _read() -> Frameworks:
    return load(FILE, _frameworks, hint=HINT)


def frameworks() -> dict[str, FrameworkInfo]:
    return _read().frameworks


def types_needing_mpi() -> frozenset[str]:
    return _read().types_needing_mpi


def _severity(value: Any) -> Severity:
    """A launcher_sets key: the severity of setting one of its variables yourself."""
    if value not in ("error", "warning"):
        raise fault(f"a severity is error or warning, not {value!r}", "launcher_sets")
    return value


def launcher_variables() -> dict[str, dict[str, Severity]]:
    """distribution type -> {variable Azure ML's launcher sets: the severity of setting it yourself}."""
    return _read().launcher_variables


def smoke_script_imports(script: str) -> tuple[str, ...]:
    """The modules a smoke script (ddp_smoke.py, tf_smoke.py) imports whatever the framework."""
    return _read().smoke_scripts.get(script, ())


def node_rank_variables() -> tuple[dict[str, str], frozenset[str]]:
    """(distribution type -> the variable that is a node's rank under per-node launch, the variables that
    read like a node rank but are not)."""
    data = _read()
    return data.node_rank, data.not_node_rank
