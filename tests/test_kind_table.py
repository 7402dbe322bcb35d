"""Resource kinds as a table (issue 42): what differs by kind lives in the kind's own modules (plan/kinds/K.py for
the plan, apply/kinds/K.py for how apply makes it), looked up by Resource.type in plan/kinds KINDS and apply/kinds
STEPS. The engines and views do not branch on a kind's name: the few comparisons left are listed here, each with
why. Read from the source with `ast`, so a new branch anywhere in plan/, apply/ or commands/views/ fails here."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from infra_cli.apply.kinds import STEPS
from infra_cli.apply.kinds.base import KindSteps
from infra_cli.azure.kinds import AZURE_KINDS, AzureKind
from infra_cli.azure.protocol import Provider
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.kinds.base import Kind
from infra_cli.knowledge.skus import load_catalog
from infra_cli.plan.cost import cluster_costs
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.engine import with_sensitive
from infra_cli.plan.live import live_fingerprint
from infra_cli.plan.model import CREATE, LiveState, Resource, ResourceChange
from infra_cli.stack.load import load_stack
from infra_cli.conventions import TAG_STACK
from infra_cli.stack.secret import Secret

ROOT = Path(__file__).resolve().parent.parent / "infra_cli"
SCANNED = ("plan", "apply", "commands/views")
KIND_MODULES = ("plan/kinds/", "apply/kinds/")
# (module, function) -> why it still names a kind. None left: what differed is a Kind attribute (`sized`, which
# plan/cost.py reads as the `size` a change carries; `public_ip_needs_subnet`; `resolves_curated`).
ALLOWED: dict[tuple[str, str], str] = {}


def _kind_comparisons(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing function, line) of each `... == "cluster"` / `!= "environment"` (any kind's name)."""
    names = set(KINDS)
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in child.ops):
                operands = [child.left, *child.comparators]
                if any(isinstance(o, ast.Constant) and o.value in names for o in operands):
                    found.append((function, child.lineno))
            visit(child, function)

    visit(tree, "<module>")
    return found


def test_the_engines_and_views_look_a_kind_up_instead_of_branching_on_its_name():
    branches = []
    for part in SCANNED:
        for path in sorted((ROOT / part).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if module.startswith(KIND_MODULES):
                continue
            for function, line in _kind_comparisons(ast.parse(path.read_text("utf-8"))):
                if (module, function) not in ALLOWED:
                    branches.append(f"{module}:{line} ({function})")
    assert not branches, ("a branch on a kind's name outside plan/kinds and apply/kinds: put what differs in the "
                          f"kind's module and look it up (KINDS[...] / STEPS[...]), or list it in ALLOWED with why: "
                          f"{branches}")


def test_the_allowed_branches_are_still_there():
    """An entry of ALLOWED no branch needs any more is taken out, so the list says what is left."""
    present = set()
    for module, _ in ALLOWED:
        present |= {(module, f) for f, _ in _kind_comparisons(ast.parse((ROOT / module).read_text("utf-8")))}
    assert set(ALLOWED) <= present, set(ALLOWED) - present


def test_every_kind_is_planned_and_applied():
    assert set(KINDS) == set(STEPS), (set(KINDS), set(STEPS))
    for name, kind in KINDS.items():
        assert kind.name == name and kind.section and kind.az_noun and kind.imported_noun
        for method in ("judge", "declared", "output", "read_imported", "declaration",
                       "desired", "read_live", "normalise"):
            assert getattr(type(kind), method) is not getattr(Kind, method), f"{name} does not define {method}"
    for name, steps in STEPS.items():
        for method in ("step", "adopt", "destroy_refusal", "importable", "adopt_imported", "forget"):
            assert getattr(type(steps), method) is not getattr(KindSteps, method), f"{name} does not define {method}"


# The Provider's methods named for one kind, of which azure/kinds.py's codecs are made: the engines read, list, write
# and delete through `read(kind, ...)`, `list(kind)`, `write(kind, ...)`, `delete(kind, ...)` instead. What only one
# kind has (an environment's batch of version reads, the tags put on one version) is no such method.
PER_KIND = {"list_computes", "read_compute", "put_cluster", "delete_cluster", "listed_environments",
            "create_environment_version", "archive_environment"}
# (module, method) -> why it still calls one by its kind's name. None left: a compute a stack names without managing
# it (plan/referenced.py, smoke's check that what a distribution runs on exists) is read as the cluster kind reads one.
PER_KIND_ALLOWED: dict[tuple[str, str], str] = {}


def _per_kind_calls(tree: ast.AST) -> list[tuple[str, int]]:
    return [(node.attr, node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in PER_KIND]


def test_every_kind_has_an_azure_codec_that_reads_lists_writes_and_deletes_it():
    assert set(AZURE_KINDS) == set(KINDS), (set(AZURE_KINDS), set(KINDS))
    for name, codec in AZURE_KINDS.items():
        for method in ("list", "read", "write", "delete"):
            assert getattr(type(codec), method) is not getattr(AzureKind, method), f"{name} does not define {method}"
    for method in ("list", "read", "write", "delete"):
        assert callable(getattr(Provider, method, None)), f"the Provider protocol has no {method}(kind, ...)"


def test_the_engines_read_and_write_a_resource_by_its_kind():
    calls = []
    for part in ("plan", "apply", "smoke", "state"):
        for path in sorted((ROOT / part).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            calls += [f"{module}:{line} ({attr})" for attr, line in _per_kind_calls(ast.parse(path.read_text("utf-8")))
                      if (module, attr) not in PER_KIND_ALLOWED]
    assert not calls, ("call the Provider by kind (read/list/write/delete with the kind's name, azure/kinds.py), or "
                       f"list the call in PER_KIND_ALLOWED with why: {calls}")
    present = {(module, attr) for module, _ in PER_KIND_ALLOWED
               for attr, _ in _per_kind_calls(ast.parse((ROOT / module).read_text("utf-8")))}
    assert set(PER_KIND_ALLOWED) <= present, set(PER_KIND_ALLOWED) - present


def test_the_provider_interface_has_no_way_around_it_to_the_sdk_clients():
    """state/ and smoke/ read and write through the Provider's own methods (records, jobs), never `.clients`."""
    assert "clients" not in getattr(Provider, "__annotations__", {})
    for part in ("state", "smoke", "plan", "apply"):
        for path in (ROOT / part).rglob("*.py"):
            assert ".clients" not in path.read_text("utf-8"), path


# Fingerprints taken with the live state's one field per kind (clusters=, environments=) before LiveState was keyed
# by kind: a saved plan records one, and apply compares it with the live state read again, so the same live state
# must give the same string, or every plan saved before an upgrade would be refused as stale.
_CLUSTER = Resource("cluster.gpu", "cluster", "gpu", {"size": "Standard_NC24ads_A100_v4", "max_instances": 2,
                                                      "description": Secret("team token 42")}, {TAG_STACK: "demo"})
_ENVIRONMENT = Resource("environment.train", "environment", "train",
                        {"version": "3", "image": "mcr.microsoft.com/a:1", "next_version": 4}, {TAG_STACK: "demo"})
FINGERPRINTS_BEFORE = [
    ({}, "ba01e5148d5ddfe731f1b04f1757b27e"),
    ({"cluster": {"gpu": _CLUSTER}}, "0e9adf95e6aad8dc7cec4b17335e20c7"),
    ({"cluster": {"gpu": _CLUSTER}, "environment": {"train": _ENVIRONMENT}}, "b797d140943d2fb3a599b367881157f7"),
]


def test_a_live_states_fingerprint_is_the_string_plan_files_recorded_before_it_was_keyed_by_kind():
    for resources, before in FINGERPRINTS_BEFORE:
        assert live_fingerprint(LiveState(dict(resources))) == before, resources
    changed = Resource(_CLUSTER.address, "cluster", "gpu", {**_CLUSTER.attributes, "max_instances": 3}, _CLUSTER.tags)
    assert live_fingerprint(LiveState({"cluster": {"gpu": changed}})) != FINGERPRINTS_BEFORE[1][1]


def test_each_kind_reads_its_own_entry_of_the_live_state():
    live = LiveState()
    for name, kind in KINDS.items():
        kind.live(live)["x"] = Resource(f"{name}.x", name, "x", {})
    assert {name: list(resources) for name, resources in live.resources.items()} == {n: ["x"] for n in KINDS}
    assert all(kind.live(live)["x"].type == name for name, kind in KINDS.items())


SHIPPED = sorted((ROOT.parent / "stacks").glob("*.yaml")) + sorted((ROOT.parent / "tests/guides/stacks").glob("*.yaml"))


def test_plan_prices_the_changes_of_a_sized_kind_and_no_other():
    """plan/cost.py cannot look a kind up (plan/model.py reads it; the kinds read plan/model.py): it prices a change
    by the `size` it carries, which only a `sized` kind's resources have."""
    priced_somewhere = set()
    for path in SHIPPED:
        desired = desired_resources(load_stack(path))
        changes = [ResourceChange(r.address, r.type, r.name, CREATE, None, r.attributes) for r in desired]
        priced = {c.address for c in cluster_costs(changes, load_catalog())}
        assert priced == {r.address for r in desired if KINDS[r.type].sized}, path
        priced_somewhere |= {a.split(".", 1)[0] for a in priced}
    assert priced_somewhere == {name for name, kind in KINDS.items() if kind.sized}


def test_a_value_from_a_variable_is_shown_sensitive_in_every_kinds_changes():
    """plan/engine.py with_sensitive finds a change by its kind's stack section, so a new kind's ${VAR} values are
    masked without a line of it naming the kind."""
    source = SimpleNamespace(interpolated={(kind.section, "x", "description") for kind in KINDS.values()})
    changes = [ResourceChange(f"{name}.x", name, "x", CREATE, None, {"description": "s"}) for name in KINDS]
    assert [c.sensitive for c in with_sensitive(changes, source)] == [(("description",),)] * len(KINDS)
